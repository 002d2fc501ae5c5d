"""The ``ppage-jax`` command line: ``main`` and one module per subcommand."""

from ppage_jax.cli.args import add_config_arguments, load_cli_config
from ppage_jax.cli.main import main

__all__ = ["add_config_arguments", "load_cli_config", "main"]

"""Reading YAML safely: YAML 1.2 numbers, a size limit per file, a bound on what aliases
expand to (recursive aliases refused) and duplicate keys refused, each as a
:class:`~ppage_jax.config.fields.ConfigError` naming the file."""

from __future__ import annotations

import math
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import yaml

from ppage_jax.config.fields import ConfigError, clip

# Files above MAX_FILE_BYTES are refused, and aliases may add at most MAX_ALIAS_NODES nodes to
# a document once expanded.
MAX_FILE_BYTES = 4 * 2**20
MAX_ALIAS_NODES = 1000


class ConfigLoader(yaml.SafeLoader):
    """``yaml.SafeLoader`` that reads ``3e-4`` and ``1e6`` as floats (YAML 1.2), as PyYAML
    does not: its YAML 1.1 float pattern needs a dot and a signed exponent. YAML 1.1's
    base-60 numbers are not numbers here: ``1:30`` is the string ``'1:30'`` (never 90), so
    a numeric key given one is refused by its check. Numbers must be written plainly: an
    integer in decimal digits (``1_0``, ``0x10``, ``0b1`` and ``010`` are refused,
    which YAML 1.1 reads as 10, 16, 1 and 8) and no number with a ``_``."""


_FLOAT_TAG = "tag:yaml.org,2002:float"
_INT_TAG = "tag:yaml.org,2002:int"
ConfigLoader.yaml_implicit_resolvers = {
    first: [(tag, regexp) for tag, regexp in resolvers if tag not in (_FLOAT_TAG, _INT_TAG)]
    for first, resolvers in yaml.SafeLoader.yaml_implicit_resolvers.items()
}
ConfigLoader.add_implicit_resolver(
    _INT_TAG,
    re.compile(
        r"""^(?:[-+]?0b[0-1_]+
    |[-+]?0[0-7_]+
    |[-+]?(?:0|[1-9][0-9_]*)
    |[-+]?0x[0-9a-fA-F_]+)$""",
        re.X,
    ),
    list("-+0123456789"),
)
ConfigLoader.add_implicit_resolver(
    _FLOAT_TAG,
    re.compile(
        r"""^(?:
     [-+]?(?:[0-9][0-9_]*)\.[0-9_]*(?:[eE][-+]?[0-9]+)?
    |[-+]?(?:[0-9][0-9_]*)(?:[eE][-+]?[0-9]+)
    |[-+]?\.[0-9_]+(?:[eE][-+]?[0-9]+)?
    |[-+]?\.(?:inf|Inf|INF)
    |\.(?:nan|NaN|NAN))$""",
        re.X,
    ),
    list("-+0123456789."),
)


_PLAIN_INT = re.compile(r"[-+]?(?:0|[1-9][0-9]*)")


def _walk(root: yaml.Node, start: str = "") -> Iterator[tuple[yaml.Node, str]]:
    """Every node of a document once (an aliased node too), with its dotted key: a mapping's
    value under ``parent.key``, a sequence item under ``parent[i]``, a mapping's key node
    under its mapping's (``<key>`` at the top)."""
    stack: list[tuple[yaml.Node, str]] = [(root, start)]
    seen: set[int] = set()
    while stack:
        node, dotted = stack.pop()
        if id(node) in seen:
            continue
        seen.add(id(node))
        yield node, dotted
        if isinstance(node, yaml.SequenceNode):
            stack.extend((child, f"{dotted}[{i}]") for i, child in enumerate(node.value))
        elif isinstance(node, yaml.MappingNode):
            for key_node, value_node in node.value:
                name = key_node.value if isinstance(key_node, yaml.ScalarNode) else "?"
                stack.append((key_node, dotted or "<key>"))
                stack.append((value_node, f"{dotted}.{name}" if dotted else str(name)))


def _check_plain_numbers(root: yaml.Node, source: str, key: str) -> None:
    """Refuse an integer not written in plain decimal digits, or a number with a ``_``:
    ConfigError naming the file, the dotted key (``key`` for the document itself) and the
    text."""
    for node, dotted in _walk(root, "" if key == "<yaml>" else key):
        if isinstance(node, yaml.ScalarNode) and node.tag in (_INT_TAG, _FLOAT_TAG):
            text = node.value
            if (node.tag == _INT_TAG and not _PLAIN_INT.fullmatch(text)) or "_" in text:
                line = node.start_mark.line + 1
                raise ConfigError(
                    source,
                    dotted or "<yaml>",
                    text,
                    f"numbers must be written plainly (line {line}): an integer in decimal "
                    f"digits (no 0x, 0b or leading 0) and no '_' in any number",
                )


def _children(node: yaml.Node) -> list[yaml.Node]:
    if isinstance(node, yaml.SequenceNode):
        return list(node.value)
    if isinstance(node, yaml.MappingNode):
        return [part for pair in node.value for part in pair]
    return []


def _alias_growth(root: yaml.Node) -> float:
    """Nodes that aliases add once the document is expanded (inf for a recursive alias)."""
    sizes: dict[int, int] = {}
    on_path: set[int] = set()
    stack: list[tuple[yaml.Node, bool]] = [(root, False)]
    while stack:
        node, done = stack.pop()
        key = id(node)
        if done:
            on_path.discard(key)
            sizes[key] = 1 + sum(sizes[id(child)] for child in _children(node))
            continue
        if key in sizes:
            continue
        on_path.add(key)
        stack.append((node, True))
        for child in _children(node):
            if id(child) in on_path:
                return math.inf
            stack.append((child, False))
    return sizes[id(root)] - len(sizes)


def _check_unique_keys(root: yaml.Node, source: str) -> None:
    """Refuse a mapping (at any depth) that gives one key twice: ConfigError naming the
    file, the dotted key and both lines (PyYAML would keep the last silently)."""
    for node, prefix in _walk(root):
        if not isinstance(node, yaml.MappingNode):
            continue
        first: dict[Any, int] = {}
        for key_node, _ in node.value:
            key = key_node.value if isinstance(key_node, yaml.ScalarNode) else None
            if key is None or key_node.tag == "tag:yaml.org,2002:merge":
                continue
            line = key_node.start_mark.line + 1
            if key in first:
                raise ConfigError(
                    source,
                    f"{prefix}.{key}" if prefix else str(key),
                    key,
                    f"duplicate key at line {line} (first given at line "
                    f"{first[key]}); each key may appear once in a mapping",
                )
            first[key] = line


def _yaml_problem(err: yaml.YAMLError) -> str:
    """PyYAML's error in one line: the problem and where (line and column, 1-based)."""
    mark = getattr(err, "problem_mark", None)
    problem = getattr(err, "problem", None) or " ".join(str(err).split())
    where = f" at line {mark.line + 1}, column {mark.column + 1}" if mark is not None else ""
    return clip(f"{problem}{where}", 500)


def load_yaml(text: str | bytes, source: str, key: str = "<yaml>", shown: Any = None) -> Any:
    """Parse one YAML document with :class:`ConfigLoader`; bad YAML, an alias expansion
    beyond ``MAX_ALIAS_NODES`` nodes and nesting too deep raise :class:`ConfigError`."""
    loader = None
    try:
        loader = ConfigLoader(text)
        node = loader.get_single_node()
        if node is None:
            return None
        growth = _alias_growth(node)
        if growth > MAX_ALIAS_NODES:
            raise ConfigError(
                source,
                key,
                shown,
                f"YAML aliases expand to too much ({growth} extra nodes; at most "
                f"{MAX_ALIAS_NODES} are allowed and recursive aliases never are)",
            )
        _check_unique_keys(node, source)
        _check_plain_numbers(node, source, key)
        return loader.construct_document(node)
    except yaml.YAMLError as err:
        raise ConfigError(source, key, shown, f"is not valid YAML: {_yaml_problem(err)}") from None
    except RecursionError:
        raise ConfigError(source, key, shown, "is nested too deeply") from None
    finally:
        if loader is not None:
            loader.dispose()


def read_yaml_file(file: Path) -> dict:
    """The mapping a config file holds (at most ``MAX_FILE_BYTES``, read with
    :func:`load_yaml`); anything else raises :class:`ConfigError`."""
    try:
        size = file.stat().st_size
        if size > MAX_FILE_BYTES:
            raise ConfigError(
                str(file),
                "<file>",
                f"{size} bytes",
                f"config files may hold at most {MAX_FILE_BYTES} bytes",
            )
        data = file.read_bytes()
    except OSError as err:
        raise ConfigError(
            str(file), "<file>", file.name, f"cannot be read: {err.strerror or err}"
        ) from None
    body = load_yaml(data, str(file))
    if not isinstance(body, dict):
        raise ConfigError(str(file), "<top level>", body, "must be a mapping")
    return body

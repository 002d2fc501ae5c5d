"""Random-policy throughput of the default config under jit(vmap) with the batched auto-reset,
batch 1 to 65536: env-steps/s, agent-steps/s, compile time, device, and the NumPy oracle's
env-steps/s in the same run. The same code as `ppage-jax bench` (ppage_jax/bench/).

    python benchmarks/throughput.py                      # default config, 1..65536
    python benchmarks/throughput.py --batch-sizes 1,4096 --steps 50 --no-peers
    python benchmarks/throughput.py --configs configs/default configs/1v1 --plot docs/throughput.png
"""

from __future__ import annotations

import argparse
import sys

from ppage_jax.cli import bench

if __name__ == "__main__":
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    bench.add_arguments(parser)
    parser.set_defaults(
        configs=["configs/default"], batch_sizes=[1, 4, 16, 64, 256, 1024, 4096, 16384, 65536]
    )
    sys.exit(bench.main(parser.parse_args()))

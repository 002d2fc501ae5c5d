"""The benchmark's public names in one place. The code lives in
:mod:`~ppage_jax.bench.throughput` (timing one environment, the oracle, first-step time),
:mod:`~ppage_jax.bench.peers` (Jumanji, JaxMARL), :mod:`~ppage_jax.bench.scaling` (grid size,
agents, batch, per builder) and :mod:`~ppage_jax.bench.report` (the runs and their tables)."""

from __future__ import annotations

from ppage_jax.bench.peers import (
    PEER_RATIOS,
    PPAGE_2V2,
    TWO_V_TWO,
    prepare_jaxmarl_simple_tag,
    prepare_jumanji_lbf,
    run_peers,
)
from ppage_jax.bench.report import (
    format_full_report,
    format_report,
    run_benchmark,
    run_report,
    write_report,
)
from ppage_jax.bench.report import plot_batches as plot_scaling
from ppage_jax.bench.throughput import (
    AUTO_RESET,
    NO_RESET,
    Result,
    Timed,
    _first_step_here,
    bench_env,
    bench_oracle,
    default_steps,
    device_info,
    first_step_seconds,
    interleaved,
    oracle_for_env,
    peak_memory_bytes,
    prepare_env,
    shipped_configs,
    state_bytes,
)

__all__ = [
    "AUTO_RESET",
    "NO_RESET",
    "PEER_RATIOS",
    "PPAGE_2V2",
    "TWO_V_TWO",
    "Result",
    "Timed",
    "_first_step_here",
    "bench_env",
    "bench_oracle",
    "default_steps",
    "device_info",
    "first_step_seconds",
    "format_full_report",
    "format_report",
    "interleaved",
    "oracle_for_env",
    "peak_memory_bytes",
    "plot_scaling",
    "prepare_env",
    "prepare_jaxmarl_simple_tag",
    "prepare_jumanji_lbf",
    "run_benchmark",
    "run_peers",
    "run_report",
    "shipped_configs",
    "state_bytes",
    "write_report",
]

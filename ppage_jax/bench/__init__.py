"""Throughput benchmarks (env-steps/s, compile time) against peers: ``ppage-jax bench``."""

"""Benchmarks that produce the figures in the README (`python -m bench.pipeline`)."""

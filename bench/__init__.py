"""The measurements behind docs/performance.md: the suite (`python -m bench.suite`), its modules,
and the benchmarks around it."""

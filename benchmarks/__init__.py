"""OpenNeuron's benchmark suite: `.venv/bin/python benchmarks/run.py [--quick]`.

Modules: `harness` (configurations, the interleaved timing loop, statistics,
correctness check), `probe` (one process per workload and configuration for
peak memory and compile times), `report` (JSON, Markdown, chart, README),
`workloads/` (one module per concern). The older single-purpose scripts
`eager_overhead.py` and `collectives_bandwidth.py` stand alone.
"""

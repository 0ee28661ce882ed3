"""Benchmarks: latency, CPU, memory and cold start at 100-5000 nodes, beside a floor and a typical extender.

Run ``python -m bench`` from the repository root (``--quick`` for a smoke run); ``python -m bench.burst`` for the
scheduler's pace in a burst, ``python -m bench.herding`` for where a burst's pods land.
"""

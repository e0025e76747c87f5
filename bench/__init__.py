"""Throughput benchmarks (``make bench``)."""

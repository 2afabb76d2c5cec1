"""Inference benchmarking: model sources, runtimes, MLPerf-style scenarios."""

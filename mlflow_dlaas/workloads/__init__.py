"""Measured workloads: training loops, inference scenarios, and a sample workload."""

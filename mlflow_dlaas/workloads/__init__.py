"""Measured workloads: the training and inference entry points."""

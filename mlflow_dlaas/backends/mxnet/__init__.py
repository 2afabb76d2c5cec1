"""The mxnet backend."""

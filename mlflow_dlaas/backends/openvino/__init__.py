"""The openvino backend."""

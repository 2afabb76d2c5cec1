"""The onnxruntime backend."""

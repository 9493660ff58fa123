"""ONNX Runtime's provider bridge: recognised in function names, and its static-build fix."""

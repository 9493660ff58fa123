"""workbench: build ONNX Runtime from source with CUDA through Nix or Flox, and watch it."""

__version__ = "0.1.0"

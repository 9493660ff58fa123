"""Projects the workbench generates to build: the C++ sample and the CUDA fixture."""

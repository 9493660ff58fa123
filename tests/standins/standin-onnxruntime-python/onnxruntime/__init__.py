"""STAND-IN for ONNX Runtime's Python module, for tests only: no onnxruntime wheel can be built
or installed here. It has what the smoke probe (workbench/debugging/smoke_probe.py, `run`) uses
of the real module, with the real names: `__version__`, `get_device()`,
`get_available_providers()`, `InferenceSession(path, providers=...)` with `get_providers()`,
`get_inputs()` (name, shape, type) and `run(None, feeds)` (onnxruntime/__init__.py and
onnxruntime/capi/onnxruntime_inference_collection.py of microsoft/onnxruntime). It reports the
release in STANDIN_ORT_VERSION and runs no model: its one output is its first input, which
the probe's check of a user's model (finite outputs) accepts.
"""

import os
from types import SimpleNamespace

__version__ = os.environ.get("STANDIN_ORT_VERSION", "0.0.0-standin")


def get_device():
    return "CPU"


def get_available_providers():
    return ["CPUExecutionProvider"]


class InferenceSession:
    def __init__(self, path, providers=None):
        self.path = path
        self.providers = list(providers or get_available_providers())

    def get_providers(self):
        return self.providers

    def get_inputs(self):
        return [SimpleNamespace(name="A", shape=[2, 2], type="tensor(float)")]

    def run(self, names, feeds):
        return [feeds["A"]]

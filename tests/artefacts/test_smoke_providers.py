"""A CUDA variant's smoke must have run the model on the CUDA provider (`require_providers`).

The checks are in the shape the smoke probe (workbench/debugging/smoke_probe.py, `run`) prints:
`available_providers` from onnxruntime, one entry per provider in `runs`. No GPU exists here,
so a CUDA provider that loads but fails is written out as the probe reports it: the session
falling back to the CPU provider (its "it fell back" error), or an exception from
InferenceSession (ONNX Runtime's message when libcudart cannot be loaded).
"""

from __future__ import annotations

from workbench.artefacts.smoke_target import CUDA_PROVIDER, require_providers

CPU_RUN = {
    "provider": "CPUExecutionProvider",
    "ok": True,
    "session_providers": ["CPUExecutionProvider"],
    "seconds": 0.002,
}
BOTH = ["CUDAExecutionProvider", "CPUExecutionProvider"]


def check(available: list[str], runs: list[dict]) -> dict:
    return {
        "python": "3.13.5",
        "onnxruntime": "1.23.2",
        "available_providers": available,
        "runs": runs,
        "ok": all(run["ok"] for run in runs),
    }


def test_a_cuda_provider_that_falls_back_to_the_cpu_fails_the_smoke() -> None:
    fell_back = {
        "provider": CUDA_PROVIDER,
        "ok": False,
        "session_providers": ["CPUExecutionProvider"],
        "error": f"{CUDA_PROVIDER} was asked for but the session runs on CPUExecutionProvider "
        "(it fell back)",
        "seconds": 0.4,
    }
    why = require_providers(check(BOTH, [fell_back, CPU_RUN]), cuda=True)
    assert why == (
        f"the model failed on {CUDA_PROVIDER}: {CUDA_PROVIDER} was asked for but the session "
        "runs on CPUExecutionProvider (it fell back)"
    )


def test_a_cuda_provider_whose_session_raises_fails_the_smoke() -> None:
    raised = {
        "provider": CUDA_PROVIDER,
        "ok": False,
        "error": "RuntimeError: [ONNXRuntimeError] : 1 : FAIL : Failed to load library "
        "libonnxruntime_providers_cuda.so with error: libcudart.so.12: cannot open shared "
        "object file: No such file or directory",
        "seconds": 0.01,
    }
    why = require_providers(check(BOTH, [raised, CPU_RUN]), cuda=True)
    assert why is not None and why.startswith(f"the model failed on {CUDA_PROVIDER}: RuntimeError")
    assert "libcudart.so.12" in why


def test_a_cuda_provider_listed_but_never_run_fails_the_smoke() -> None:
    why = require_providers(check(BOTH, [CPU_RUN]), cuda=True)
    assert why == f"the model failed on {CUDA_PROVIDER}: it did not run"


def test_a_cuda_provider_that_ran_passes_and_a_cpu_variant_needs_none() -> None:
    ran = {"provider": CUDA_PROVIDER, "ok": True, "session_providers": BOTH, "seconds": 0.3}
    assert require_providers(check(BOTH, [ran, CPU_RUN]), cuda=True) is None
    cpu_only = check(["CPUExecutionProvider"], [CPU_RUN])
    assert require_providers(cpu_only, cuda=False) is None
    missing = require_providers(cpu_only, cuda=True)
    assert missing is not None and missing.startswith(f"a CUDA variant without {CUDA_PROVIDER}")
    assert require_providers(None, cuda=True) is None  # no check at all: the smoke said why

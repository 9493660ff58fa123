"""The smoke check that runs INSIDE the Python under test (so it imports nothing of ours).

    python smoke_probe.py MODEL_PATH (builtin|user) [--build-model] [--c-api LIBRARY]...
    python smoke_probe.py --c-api-version LIBRARY

Imports onnxruntime, reports its version and providers, and runs the model on each available
provider. Each --c-api LIBRARY (a built libonnxruntime.so) is asked for the version a C, C++ or
Rust consumer sees: `OrtGetApiBase()->GetVersionString()` (ONNX Runtime's onnxruntime_c_api.h:
`struct OrtApiBase { GetApi; GetVersionString; }`, unversioned and frozen, so the same for every
release). That runs in a child of this Python (`--c-api-version`), so a second copy of ONNX
Runtime never shares a process with the module, and a library that crashes on load says so.
"builtin" is the workbench's MatMul model (A[2x3] @ B[3x2]), whose output is
checked; a user's model (ONNX_TEST_MODEL) gets generated inputs and a finite-output check.
--build-model makes the builtin model here with `onnx` first (when the workbench's own
Python has no `onnx`). The last stdout line is `WORKBENCH-SMOKE {json}`.
"""

import json
import subprocess
import sys
import time
import traceback

MARKER = "WORKBENCH-SMOKE "
C_API_MARKER = "WORKBENCH-C-API "


def c_api_version(library):
    """The version string ONNX Runtime's C API reports, in this process:
    {"library", "version"} or {"library", "error"}."""
    import ctypes

    entry = {"library": library}
    try:
        loaded = ctypes.CDLL(library)
    except OSError as exc:
        entry["error"] = f"cannot load it: {exc}"
        return entry
    try:
        get_api_base = loaded.OrtGetApiBase
    except AttributeError:
        entry["error"] = "it exports no OrtGetApiBase (not ONNX Runtime's C API library)"
        return entry

    class OrtApiBase(ctypes.Structure):  # two function pointers, in this order
        _fields_ = [
            ("GetApi", ctypes.CFUNCTYPE(ctypes.c_void_p, ctypes.c_uint32)),
            ("GetVersionString", ctypes.CFUNCTYPE(ctypes.c_char_p)),
        ]

    get_api_base.restype = ctypes.POINTER(OrtApiBase)
    get_api_base.argtypes = []
    base = get_api_base()
    if not base:
        entry["error"] = "OrtGetApiBase() returned NULL"
        return entry
    version = base.contents.GetVersionString()
    if version is None:
        entry["error"] = "GetVersionString() returned NULL"
        return entry
    entry["version"] = version.decode("utf-8", "replace")
    return entry


def c_api_versions(libraries, timeout=60):
    """c_api_version of each library, each in its own child of this Python."""
    found = []
    for library in libraries:
        try:
            done = subprocess.run(
                [sys.executable, __file__, "--c-api-version", library],
                capture_output=True,
                text=True,
                timeout=timeout,
                check=False,
            )
        except subprocess.TimeoutExpired:
            found.append({"library": library, "error": f"no answer within {timeout} s"})
            continue
        lines = [line for line in done.stdout.splitlines() if line.startswith(C_API_MARKER)]
        if lines:
            found.append(json.loads(lines[-1][len(C_API_MARKER) :]))
        else:
            said = (done.stderr.strip().splitlines() or ["nothing"])[-1]
            found.append(
                {"library": library, "error": f"the check ended with {done.returncode}: {said}"}
            )
    return found


def build_model(path):
    """The builtin model: Y = MatMul(A, B), opset 13, IR 8 (loads on ORT 1.10 and newer)."""
    import onnx
    from onnx import TensorProto, helper

    inputs = [
        helper.make_tensor_value_info("A", TensorProto.FLOAT, [2, 3]),
        helper.make_tensor_value_info("B", TensorProto.FLOAT, [3, 2]),
    ]
    output = helper.make_tensor_value_info("Y", TensorProto.FLOAT, [2, 2])
    graph = helper.make_graph(
        [helper.make_node("MatMul", ["A", "B"], ["Y"])], "workbench_smoke", inputs, [output]
    )
    model = helper.make_model(
        graph, opset_imports=[helper.make_opsetid("", 13)], producer_name="workbench"
    )
    model.ir_version = 8
    onnx.checker.check_model(model)
    onnx.save(model, path)


def _feeds(session, builtin, np):
    if builtin:
        a = np.arange(6, dtype=np.float32).reshape(2, 3)
        b = np.arange(6, dtype=np.float32).reshape(3, 2) / 2
        return {"A": a, "B": b}, a @ b
    types = {
        "tensor(float)": np.float32,
        "tensor(double)": np.float64,
        "tensor(float16)": np.float16,
        "tensor(int64)": np.int64,
        "tensor(int32)": np.int32,
        "tensor(int8)": np.int8,
        "tensor(uint8)": np.uint8,
        "tensor(bool)": np.bool_,
    }
    feeds = {}
    for item in session.get_inputs():
        shape = [dim if isinstance(dim, int) and dim > 0 else 1 for dim in item.shape]
        dtype = types.get(item.type, np.float32)
        feeds[item.name] = np.ones(shape, dtype=dtype)
    return feeds, None


def run(model, builtin, libraries=()):
    result = {"python": sys.version.split()[0], "executable": sys.executable, "model": model}
    if libraries:
        result["c_api"] = c_api_versions(libraries)
    try:
        import onnxruntime as ort
    except Exception as exc:
        result["error"] = f"import onnxruntime failed: {exc!r}"
        return result
    import numpy as np

    result["onnxruntime"] = ort.__version__
    result["onnxruntime_file"] = ort.__file__
    result["device"] = ort.get_device()
    providers = ort.get_available_providers()
    result["available_providers"] = providers
    print(f"onnxruntime {ort.__version__}; providers: {', '.join(providers)}", flush=True)
    runs = []
    for provider in providers:
        entry = {"provider": provider, "ok": False}
        begin = time.perf_counter()
        try:
            session = ort.InferenceSession(model, providers=[provider])
            entry["session_providers"] = session.get_providers()
            feeds, expected = _feeds(session, builtin, np)
            outputs = session.run(None, feeds)
            first = np.asarray(outputs[0])
            if expected is not None:
                entry["ok"] = bool(np.allclose(first, expected))
                entry["output"] = first.tolist()
                entry["expected"] = expected.tolist()
            else:
                numeric = first.dtype.kind in "fc"
                entry["ok"] = bool(np.isfinite(first).all()) if numeric else True
                entry["output_shape"] = list(first.shape)
            if provider not in entry["session_providers"]:
                entry["ok"] = False
                entry["error"] = (
                    f"{provider} was asked for but the session runs on "
                    f"{', '.join(entry['session_providers'])} (it fell back)"
                )
        except Exception as exc:
            entry["error"] = f"{type(exc).__name__}: {exc}"
            entry["traceback"] = traceback.format_exc(limit=3)
        entry["seconds"] = round(time.perf_counter() - begin, 4)
        print(f"{provider}: {'ok' if entry['ok'] else 'FAILED'}", flush=True)
        runs.append(entry)
    result["runs"] = runs
    result["ok"] = bool(runs) and all(entry["ok"] for entry in runs)
    return result


def main(argv):
    if argv[1:2] == ["--c-api-version"]:
        print(C_API_MARKER + json.dumps(c_api_version(argv[2])), flush=True)
        return 0
    model, kind = argv[1], argv[2]
    libraries = [argv[i + 1] for i, word in enumerate(argv[:-1]) if word == "--c-api"]
    if "--build-model" in argv:
        try:
            build_model(model)
        except Exception as exc:
            print(MARKER + json.dumps({"error": f"cannot build the test model: {exc!r}"}))
            return 1
    result = run(model, kind == "builtin", libraries)
    print(MARKER + json.dumps(result), flush=True)
    return 0 if result.get("ok") else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv))

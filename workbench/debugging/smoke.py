"""Smoke runs of built artifacts, the way the seeds check them; a hang is captured, not lost.

- a Python (`--python PATH`, or a built variant's, workbench.artefacts.smoke_target): the
  probe smoke_probe.py runs in it: import onnxruntime, version and providers, the tiny model
  on each provider;
- a command (`-- CMD...`, e.g. the flake's test app): run with ONNX_TEST_MODEL set and
  LD_LIBRARY_PATH extended, as the builder flake's apps do.

A run still going after the timeout is treated as hung: its stacks are captured and
diagnosed while it is still running, and only then is its process group ended.

`SmokeResult.to_json()` (schema "workbench-smoke/1"):

    {"schema": "workbench-smoke/1", "mode": "python" | "command", "target": "...",
     "argv": [...], "status": "passed" | "failed" | "hung" | "error",
     "exit": "exit status 0" | "killed by SIGTERM" | ..., "exit_code": 0 | null,
     "seconds": 1.2, "timeout_s": 120, "model": "/tmp/.../smoke.onnx", "model_source":
     "builtin" | "ONNX_TEST_MODEL" | null, "message": "...", "output_tail": "...",
     "check": null | {"python", "onnxruntime", "available_providers": [...], "runs": [
         {"provider", "ok", "session_providers", "output", "expected", "error", "seconds"}],
         "c_api": [{"library", "version" | "error"}] (when libraries were given), "ok"},
     "capture": null | <workbench-bt/1 document without "schema">}
"""

from __future__ import annotations

import json
import os
import tempfile
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from workbench.debugging.debug_errors import DebugError
from workbench.errors import WorkbenchError
from workbench.progress.visible import terminal_text

SCHEMA = "workbench-smoke/1"
PROBE = Path(__file__).with_name("smoke_probe.py")
MODEL_ENV = "ONNX_TEST_MODEL"
Progress = Callable[[str], None]


@dataclass
class SmokeResult:
    """What a smoke run did; `status` is passed, failed, hung or error."""

    mode: str
    target: str
    argv: list[str]
    status: str
    exit_code: int | None
    exit_text: str
    seconds: float
    timeout: float
    message: str
    output_tail: str = ""
    model: str | None = None
    model_source: str | None = None
    check: dict[str, Any] | None = None
    capture_document: dict[str, Any] | None = None
    notes: list[str] = field(default_factory=list)
    raw_output: str = field(default="", repr=False)  # the whole output, to find the probe's line

    def to_json(self) -> dict[str, Any]:
        return {
            "schema": SCHEMA,
            "mode": self.mode,
            "target": self.target,
            "argv": self.argv,
            "status": self.status,
            "exit": self.exit_text,
            "exit_code": self.exit_code,
            "seconds": round(self.seconds, 3),
            "timeout_s": self.timeout,
            "model": self.model,
            "model_source": self.model_source,
            "message": self.message,
            "notes": self.notes,
            "output_tail": self.output_tail,
            "check": self.check,
            "capture": self.capture_document,
        }


def build_test_model(path: Path) -> bool:
    """Write the builtin model with this Python's `onnx`; False when onnx is not installed."""
    try:
        import onnx  # noqa: F401 - only checking that it is there
    except ImportError:
        return False
    import importlib.util

    spec = importlib.util.spec_from_file_location("workbench_smoke_probe", PROBE)
    assert spec and spec.loader
    probe = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(probe)
    probe.build_model(str(path))
    return True


def smoke_python(
    python: str | os.PathLike[str],
    timeout: float = 120.0,
    samples: int = 3,
    interval: float = 0.2,
    gdb: str | None = None,
    progress: Progress | None = None,
    libraries: Sequence[str | os.PathLike[str]] = (),
) -> SmokeResult:
    """Run the probe in `python`; a hang is captured and diagnosed before it is ended.
    Each of `libraries` (a built libonnxruntime.so) is asked for its C API's version string."""
    python = str(python)
    with tempfile.TemporaryDirectory(prefix="workbench-smoke-") as temp:
        model, source, extra = _model(Path(temp))
        assert model is not None  # None only with allow_missing
        argv = [python, str(PROBE), model, "builtin" if source == "builtin" else "user", *extra]
        for library in libraries:
            argv += ["--c-api", str(library)]
        result = _run(
            "python",
            python,
            argv,
            None,
            timeout,
            samples,
            interval,
            gdb,
            progress,
            target_root=True,
        )
        result.model, result.model_source = model, source
        result.check = _parse_probe(result.raw_output, result)
        if result.status != "hung" and result.check is not None:
            ok = bool(result.check.get("ok"))
            result.status = "passed" if ok and result.exit_code == 0 else "failed"
            result.message = _check_message(result.check)
        return result


def smoke_command(
    argv: Sequence[str],
    timeout: float = 120.0,
    library_path: Sequence[str] = (),
    samples: int = 3,
    interval: float = 0.2,
    gdb: str | None = None,
    progress: Progress | None = None,
) -> SmokeResult:
    """Run CMD with ONNX_TEST_MODEL and LD_LIBRARY_PATH set, as the builder flake's apps do."""
    with tempfile.TemporaryDirectory(prefix="workbench-smoke-") as temp:
        model, source, _extra = _model(Path(temp), allow_missing=True)
        env = dict(os.environ)
        notes = []
        if model:
            env[MODEL_ENV] = model
        else:
            notes.append(
                f"no test model: install onnx for the workbench's Python or set {MODEL_ENV}"
            )
        if library_path:
            env["LD_LIBRARY_PATH"] = os.pathsep.join(
                [*library_path, *filter(None, [os.environ.get("LD_LIBRARY_PATH")])]
            )
        result = _run(
            "command", " ".join(argv), list(argv), env, timeout, samples, interval, gdb, progress
        )
        result.model, result.model_source = model, source
        result.notes += notes
        return result


def _model(
    directory: Path, allow_missing: bool = False
) -> tuple[str | None, str | None, list[str]]:
    """(model path, where it came from, probe flags): ONNX_TEST_MODEL, else the builtin one."""
    chosen = os.environ.get(MODEL_ENV)
    if chosen:
        if not Path(chosen).is_file():
            raise WorkbenchError(f"{MODEL_ENV}={chosen}: no such file")
        return chosen, MODEL_ENV, []
    path = directory / "smoke.onnx"
    if build_test_model(path):
        return str(path), "builtin", []
    if allow_missing:
        return None, None, []
    # The Python under test may have onnx even though ours does not.
    return str(path), "builtin", ["--build-model"]


def _run(
    mode: str,
    target: str,
    argv: list[str],
    env: dict[str, str] | None,
    timeout: float,
    samples: int,
    interval: float,
    gdb: str | None,
    progress: Progress | None,
    target_root: bool = False,
) -> SmokeResult:
    from workbench.debugging.program import Program, describe_status, pick_target

    say = progress or (lambda _message: None)
    say(f"running {' '.join(argv)[:200]} (timeout {timeout:g} s)")
    begin = time.monotonic()
    program = Program(argv, env=env)
    try:
        status = program.wait(timeout)
        seconds = time.monotonic() - begin
        if status is None:
            say(f"no exit after {timeout:g} s: treating it as hung, capturing its stacks")
            document, message = _capture_hung(
                program.pid if target_root else pick_target(program.pid),
                samples,
                interval,
                gdb,
                progress,
            )
            program.stop()
            return SmokeResult(
                mode=mode,
                target=target,
                argv=argv,
                status="hung",
                exit_code=None,
                exit_text=f"still running after {timeout:g} s; stopped by the workbench",
                seconds=seconds,
                timeout=timeout,
                message=message,
                output_tail=program.output_tail(),
                capture_document=document,
                raw_output=program.output_tail(10**6, limit=1 << 20),
            )
        return SmokeResult(
            mode=mode,
            target=target,
            argv=argv,
            status="passed" if status == 0 else "failed",
            exit_code=status,
            exit_text=describe_status(status),
            seconds=seconds,
            timeout=timeout,
            message="" if status == 0 else f"{argv[0]} ended with {describe_status(status)}",
            output_tail=program.output_tail(40),
            raw_output=program.output_tail(10**6, limit=1 << 20),
        )
    finally:
        program.close()


def _capture_hung(
    pid: int, samples: int, interval: float, gdb: str | None, progress: Progress | None
) -> tuple[dict[str, Any] | None, str]:
    from workbench.debugging.bt_report import bt_document
    from workbench.debugging.capture.loop import capture
    from workbench.debugging.capture.options import CaptureOptions
    from workbench.debugging.diagnosis.verdict import diagnose

    try:
        captured = capture(
            pid, CaptureOptions(samples=samples, interval=interval, gdb=gdb), progress
        )
    except DebugError as exc:
        return None, f"hung, and its stacks could not be captured: {exc}"
    diagnosis = diagnose(captured)
    document = bt_document(captured, diagnosis)
    document.pop("schema")
    return document, f"hung: {diagnosis.summary}"


def _parse_probe(output: str, result: SmokeResult) -> dict[str, Any] | None:
    from workbench.debugging.smoke_probe import MARKER

    for line in reversed(output.splitlines()):
        if line.startswith(MARKER):
            try:
                document: dict[str, Any] = json.loads(line[len(MARKER) :])  # the probe's
                return document
            except json.JSONDecodeError:
                break
    if result.status != "hung":
        result.status = "error"
        result.message = (
            f"the check printed no result ({result.exit_text}); is {result.target} a Python? "
            "see the output above"
        )
    return None


def _check_message(check: dict[str, Any]) -> str:
    if check.get("error"):
        return str(check["error"])
    runs = check.get("runs", [])
    failed = [run for run in runs if not run.get("ok")]
    version = check.get("onnxruntime", "?")
    if not failed:
        return f"onnxruntime {version}: the model ran correctly on " + ", ".join(
            run["provider"] for run in runs
        )
    return f"onnxruntime {version}: failed on " + "; ".join(
        f"{run['provider']}: {run.get('error', 'wrong output')}" for run in failed
    )


def render_text(result: SmokeResult) -> str:
    """The human report of a smoke run."""
    lines = [
        f"smoke ({result.mode}) {result.target}: {result.status.upper()} — {result.message}".rstrip(
            " —"
        )
    ]
    lines.append(f"  {result.exit_text}, {result.seconds:.1f} s (timeout {result.timeout:g} s)")
    if result.model:
        lines.append(f"  model: {result.model} ({result.model_source})")
    check = result.check or {}
    if check.get("available_providers"):
        lines.append(
            f"  onnxruntime {check.get('onnxruntime')} (Python {check.get('python')}), providers: "
            + ", ".join(check["available_providers"])
        )
        for run in check.get("runs", []):
            verdict = "ok" if run.get("ok") else f"FAILED: {run.get('error', 'wrong output')}"
            lines.append(f"    {run['provider']}: {verdict} ({run.get('seconds', 0):.3f} s)")
    for entry in check.get("c_api") or []:
        said = entry.get("version") or f"not read: {entry.get('error')}"
        lines.append(f"  C API (OrtGetApiBase()->GetVersionString()) of {entry['library']}: {said}")
    for note in result.notes:
        lines.append(f"  note: {note}")
    if result.capture_document:
        diagnosis = result.capture_document["diagnosis"]
        lines.append(f"  diagnosis: {diagnosis['kind']}: {diagnosis['summary']}")
        lines += [f"    - {item}" for item in diagnosis["evidence"]]
        if diagnosis.get("proposed_patch"):
            lines.append(f"  proposed fix: {diagnosis['proposed_patch']['description']}")
    if result.output_tail and result.status != "passed":
        lines.append("  output (last lines):")
        # The program's output is data: its escapes must not act on the user's terminal.
        lines += [f"    {terminal_text(line)}" for line in result.output_tail.splitlines()[-20:]]
    return "\n".join(lines)

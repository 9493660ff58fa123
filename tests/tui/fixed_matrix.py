"""A matrix build in a history, from a real Nix 2.8 log, for the matrix screen's tests,
snapshots and screenshots.

The log is `tests/remote/fixtures/nix-2.8-matrix-build.log`: recorded from the loopback matrix
build of tests/remote/test_matrix_build.py (real Nix sending four stand-in CPU variants to a
second store over real sshd, one host with a refused key). Written through the core's
`History` API as the CLI records a matrix build (`hosts.matrix_build.plan_matrix_build`): the
targets with their derivations, the hosts by store URI. Two targets are added to what the log
built, as a real matrix has them: one waiting (a CUDA variant no host has started yet, of ONNX
Runtime 1.24.2 beside the others' 1.23.2: a name with -ort1_24_2 in `build A B ...`) and one in
the store already (built by an earlier run, so not asked of Nix again). Each target records its
release (`ort_version`), as `MatrixTarget.to_json` does.

`running=True` writes the log only up to `MID_BUILD_LINES` (avx2 and avx512 built on the
remote, bf16 failed there with its first error line, avx512vnni building here) and records
the build as running under a supervisor that is this very process (alive for as long as the
test: the history's liveness check keeps it running). Otherwise the whole log, the build ended
(failed: one target failed), with its per-target rows and their sizes as `target_history`
stores them. Times derive from fixed_history.START, so with the app's clock frozen the screens
read the same everywhere.
"""

from __future__ import annotations

import os
from pathlib import Path

import psutil
from recorded_builds import end, new_build
from tui.fixed_history import NOW, START

from workbench.history.records import FAILED
from workbench.history.store import History
from workbench.progress.nix_log import derivation_name
from workbench.remote.fleet import Fleet
from workbench.remote.target_history import TargetRow, record_rows

LOG = Path(__file__).resolve().parent.parent / "remote" / "fixtures" / "nix-2.8-matrix-build.log"
REMOTE_URI = "ssh-ng://root@workbench-remote?remote-store=local?root=/tmp/remote-store"
BADKEY_URI = "ssh-ng://root@workbench-badkey"
HOSTS = {REMOTE_URI: "remote", BADKEY_URI: "badkey"}
# Up to here: bf16 has failed on the remote, avx512vnni still builds here.
MID_BUILD_LINES = 95
BUILT = {  # log's derivation name -> the variant it stands in for
    "avx2": "onnxruntime-python313-cpu-avx2",
    "avx512": "onnxruntime-python313-cpu-avx512",
    "avx512vnni": "onnxruntime-python313-cpu-avx512vnni",
    "bf16": "onnxruntime-python313-cpu-avx512bf16",
}
WAITING = "onnxruntime-python313-cuda12_9-sm90-avx512-ort1_24_2"
RELEASES = {WAITING: "1.24.2"}  # the others are the pin's own, 1.23.2
IN_STORE = "onnxruntime-python313-cuda12_9-sm89-avx2"
MIB = 1024**2
# Sizes as `nix path-info -S` would give them for the outputs (the stand-ins are a few bytes).
SIZES = {
    "avx2": (212 * MIB, 1_930 * MIB),
    "avx512": (219 * MIB, 1_937 * MIB),
    "avx512vnni": (221 * MIB, 1_939 * MIB),
    IN_STORE: (1_204 * MIB, 6_811 * MIB),
}
# When each derivation started and ended, seconds after START (what the supervisor records).
TIMES = {"avx2": (4.0, 1_502.0), "avx512": (5.0, 1_611.0), "avx512vnni": (9.0, 1_873.0)}
BF16_TIMES = (1_503.0, 1_509.0)
FIRST_ERROR = "error: bf16_kernels.cc:12: no such intrinsic"  # the failing stand-in's line


def _drvs() -> dict[str, str]:
    """The log's derivation name -> its store path."""
    fleet = Fleet(host_names=HOSTS, clock=lambda: None)
    for line in LOG.read_text().splitlines():
        fleet.feed(line)
    return {derivation_name(a.drv): a.drv for a in fleet.attempts}


def _targets() -> list[dict[str, object]]:
    drvs = _drvs()
    targets: list[dict[str, object]] = [
        {
            "name": variant,
            "attr": variant,
            "drv": drvs[short],
            "out": drvs[short].removesuffix(".drv").replace("/nix/store/", "/nix/store/o"),
            "ort_version": "1.23.2",
            "in_store": False,
        }
        for short, variant in BUILT.items()
    ]
    for name, in_store in ((WAITING, False), (IN_STORE, True)):
        targets.append(
            {
                "name": name,
                "attr": name,
                "drv": f"/nix/store/{'w' if in_store else 'q'}{'0' * 31}-{name}.drv",
                "out": f"/nix/store/{'w' if in_store else 'q'}{'1' * 31}-{name}",
                "ort_version": RELEASES.get(name, "1.23.2"),
                "in_store": in_store,
            }
        )
    return targets


def write_matrix_build(state: Path, running: bool) -> int:
    """Add the matrix build to the history in `state`; its id."""
    targets = _targets()
    with History(state) as history:
        record = history.create(
            new_build(
                f"matrix-{len(targets)}",
                backend="nix",
                argv=("nix", "build", *(f".#{t['attr']}" for t in targets[:-1]), "--keep-going"),
                cwd="flake",
                settings={
                    "matrix": {
                        "targets": targets,
                        "hosts": HOSTS,
                        "local_builds": True,
                    }
                },
                eta_key="nix-matrix-6",
                jobs=16,
            ),
            now=START - 0.5,
        )
        lines = LOG.read_text().splitlines(keepends=True)
        log = Path(record.log_path)
        log.parent.mkdir(parents=True, exist_ok=True)
        log.write_text("".join(lines[:MID_BUILD_LINES] if running else lines))
        if running:
            me = psutil.Process()
            history.set_supervisor(record.id, os.getpid(), me.create_time())
            history.mark_running(record.id, os.getpid(), os.getpgid(0), NOW - 47 * 60)
            since = NOW - 21 * 60  # avx512vnni: 21 minutes so far on the frozen clock
            progress = {"derivations": [{"name": "avx512vnni", "started": since}]}
            history.update_live(record.id, MID_BUILD_LINES, progress)
            return record.id
        history.mark_running(record.id, 50_000 + record.id, 50_000 + record.id, START)
        ended = START + TIMES["avx512vnni"][1] + 2.0
        end(history, record.id, FAILED, ended=ended, duration_s=ended - START, lines=len(lines))
    rows = []
    for target in targets:
        name = str(target["name"])
        short = next((s for s, v in BUILT.items() if v == name), name)
        nar, closure = SIZES.get(short, (None, None))
        started, ended_at = TIMES.get(short, BF16_TIMES if short == "bf16" else (None, None))
        outcome = "built" if short in TIMES else "failed" if short == "bf16" else "not built"
        outcome = "in store" if target["in_store"] else outcome
        rows.append(
            TargetRow(
                name=name,
                attr=name,
                drv_path=str(target["drv"]),
                out_path=str(target["out"]),
                host={"avx512vnni": "local", "avx2": "remote", "avx512": "remote"}.get(
                    short, "remote" if short == "bf16" else ""
                ),
                outcome=outcome,
                tried_on="",
                started=START + started if started is not None else None,
                ended=START + ended_at if ended_at is not None else None,
                nar_size=nar,
                closure_size=closure,
                first_error="error: bf16_kernels.cc:12: no such intrinsic"
                if short == "bf16"
                else "",
            )
        )
    record_rows(state, record.id, rows)
    return record.id

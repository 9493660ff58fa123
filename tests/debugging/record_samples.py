"""Re-record tests/debugging/recorded/*.json from the fixture programs (run by hand).

    python tests/debugging/record_samples.py [NAME...]   (default: all)

Each file is a real `workbench bt --json` capture of one fixture, with the build directory
and checkout paths shortened, so that the diagnosis unit tests run on real gdb output.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent.parent))
sys.path.insert(0, str(HERE))

from debug_programs import build_all  # noqa: E402

from workbench.debugging.bt_report import bt_document  # noqa: E402
from workbench.debugging.capture.loop import capture  # noqa: E402
from workbench.debugging.capture.options import CaptureOptions  # noqa: E402
from workbench.debugging.diagnosis.verdict import diagnose  # noqa: E402

CASES = {
    "bridge_o2": ([], 0.3),
    "bridge_o0": ([], 0.6),
    "static_init_deadlock": ([], 0.3),
    "lock_order": ([], 0.4),
    "busy": ([], 0.3),
    "many_threads": (["4"], 0.3),
    # One verdict per thread: four threads in the bridge loop, the main one joining them; a
    # spin on a flag beside a counting loop.
    "bridge_o2_threads": (["4"], 0.4),
    "spin_mixed": (["mixed"], 0.3),
}
# Recordings of one program with other arguments.
BINARY = {"bridge_o2_threads": "bridge_o2", "spin_mixed": "spin"}


def main() -> None:
    wanted = sys.argv[1:] or list(CASES)
    with tempfile.TemporaryDirectory() as temp:
        binaries = build_all(Path(temp), sorted({BINARY.get(name, name) for name in wanted}))
        for name in wanted:
            arguments, settle = CASES[name]
            program = subprocess.Popen(
                [str(binaries[BINARY.get(name, name)]), *arguments],
                stdout=subprocess.DEVNULL,
                start_new_session=True,
            )
            try:
                time.sleep(settle)
                captured = capture(
                    program.pid, CaptureOptions(samples=3, interval=0.15, max_frames=64)
                )
            finally:
                os.killpg(program.pid, signal.SIGKILL)
                program.wait()
            document = bt_document(captured, diagnose(captured))
            text = json.dumps(document, indent=1)
            text = text.replace(str(HERE / "fixtures"), "fixtures").replace(temp, "build")
            (HERE / "recorded" / f"{name}.json").write_text(text + "\n")
            print(name, document["diagnosis"]["kind"], document["diagnosis"]["hung"])


if __name__ == "__main__":
    main()

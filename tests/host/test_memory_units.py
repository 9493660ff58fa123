"""Memory is divided by powers of 1024, so every place that shows it says GiB or MiB.

Issue 14: "21.85 GB" was 21.85 x 1024^3 bytes, that is 23.46 GB. The CLI's doctor, dry run and
settings, the OOM note and the views all go through `host.units.byte_size`.
"""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

from workbench_cli import run_workbench

from workbench.analysis.build_peaks import PeakTracker, oom_note
from workbench.host.units import GIB, MIB, byte_size, gib_size

REPO = Path(__file__).resolve().parents[2]
CPU_VARIANT = "onnxruntime-python313-cpu-avx2"
# A decimal unit after a number: "1.5 GB", "300 MB" (the old labels).
DECIMAL_UNIT = re.compile(r"\d\s?[GM]B\b")


def _cli(*args: str, state: Path) -> subprocess.CompletedProcess[str]:
    return run_workbench(*args, state=state)


def test_byte_size_says_the_binary_unit_it_divides_by() -> None:
    assert byte_size(int(21.85 * GIB)) == "21.85 GiB"
    assert byte_size(GIB) == "1.00 GiB"
    assert byte_size(GIB - 1) == "1024 MiB"
    assert byte_size(235 * MIB) == "235 MiB"
    assert byte_size(0) == "0 MiB"
    assert byte_size(None) == "-"
    assert gib_size(0.3) == "307 MiB" and gib_size(5) == "5.00 GiB"


def test_the_oom_note_says_gib() -> None:
    assert oom_note(PeakTracker().summary()) == "killed (OOM?), peak 0 MiB"


def test_doctor_dry_run_and_settings_label_gib(tmp_path: Path) -> None:
    doctor = _cli("doctor", "--nvidia-smi", str(tmp_path / "none"), state=tmp_path)
    assert doctor.returncode == 0, doctor.stderr
    memory = [line for line in doctor.stdout.splitlines() if "memory:" in line]
    assert len(memory) == 1 and re.search(r"GiB available of [\d.]+ GiB", memory[0]), memory
    assert not DECIMAL_UNIT.search(doctor.stdout), doctor.stdout

    dry = _cli("build", CPU_VARIANT, "--jobs", "3", "--dry-run", state=tmp_path)
    assert dry.returncode == 0, dry.stderr
    assert re.search(r"# 3 jobs from --jobs; [\d.]+ [GM]iB per job", dry.stderr), dry.stderr
    assert not DECIMAL_UNIT.search(dry.stderr), dry.stderr

    show = _cli("config", "show", state=tmp_path)
    assert show.returncode == 0, show.stderr
    meanings = [line for line in show.stdout.splitlines() if "_job_memory_gb" in line]
    assert len(meanings) == 2 and all("peak GiB of one" in line for line in meanings), meanings

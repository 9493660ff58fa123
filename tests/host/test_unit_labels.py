"""Sizes divided by powers of 1024 say KiB, MiB or GiB, through the one formatter in host.units.

Issue 14: memory was computed in GiB but labelled "GB"; the leftovers were `workbench hosts`
("mem GB free/total"), the debug diagnosis's stack sizes ("7.9 MB") and a second formatter for
store path sizes (artefacts.sizes.human_bytes).
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

import psutil

from workbench.artefacts.sizes import human_bytes
from workbench.debugging.diagnosis.verdict import diagnose
from workbench.debugging.model import capture_from_json
from workbench.host.units import GIB, KIB, MIB, byte_size, scaled_byte_size

REPO = Path(__file__).resolve().parents[2]
RECORDED = REPO / "tests" / "debugging" / "recorded"
DECIMAL_UNIT = re.compile(r"\d\s?[KMG]B\b|\b[KMG]B\b")


def test_scaled_byte_size_goes_from_bytes_to_gib() -> None:
    assert scaled_byte_size(None) == "-"
    assert scaled_byte_size(0) == "0 B"
    assert scaled_byte_size(1023) == "1023 B"
    assert scaled_byte_size(KIB) == "1.0 KiB"
    assert scaled_byte_size(1536) == "1.5 KiB"
    assert scaled_byte_size(int(7.9 * MIB)) == "7.9 MiB"
    assert scaled_byte_size(MIB - 1) == "1024.0 KiB"
    assert scaled_byte_size(int(2.25 * GIB)) == "2.2 GiB"
    assert scaled_byte_size(5000 * GIB) == "5000.0 GiB"


def test_store_path_sizes_use_the_shared_formatter() -> None:
    # The same words for every size it is given (report, history, variants and build screens).
    for size in (None, 0, 512, 1536, 300 * MIB + 7, 3 * GIB + 12345, 1 << 45):
        assert human_bytes(size) == scaled_byte_size(size)


def test_the_recursion_diagnosis_gives_the_stack_in_mib() -> None:
    # A real capture of tests/debugging/fixtures' bridge recursion at -O0: the stack grew.
    document = json.loads((RECORDED / "bridge_o0.json").read_text())
    diagnosis = diagnose(capture_from_json(document))
    stack = [line for line in diagnosis.primary.evidence if line.startswith("stack in use")]
    assert len(stack) == 1, diagnosis.primary.evidence
    assert re.match(r"stack in use grew from [\d.]+ MiB to [\d.]+ MiB ", stack[0]), stack[0]
    assert not DECIMAL_UNIT.search(stack[0]), stack[0]


def test_hosts_labels_this_machines_memory_in_binary_units(tmp_path: Path) -> None:
    (tmp_path / "config").mkdir()  # no hosts.toml: the table has this machine alone
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "workbench",
            "--config",
            str(tmp_path / "config"),
            "--state-dir",
            str(tmp_path / "state"),
            "hosts",
        ],
        capture_output=True,
        text=True,
        cwd=REPO,
        timeout=60,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    header, local = done.stdout.splitlines()[:2]
    assert "memory free/total" in header and not DECIMAL_UNIT.search(header), header
    assert local.startswith("local "), done.stdout
    # The total does not move while the test runs; what is free does, so only its unit is read.
    total = byte_size(psutil.virtual_memory().total)
    assert re.search(rf"\b[\d.]+ [GM]iB/{re.escape(total)} ", local), (local, total)
    assert not DECIMAL_UNIT.search(done.stdout), done.stdout

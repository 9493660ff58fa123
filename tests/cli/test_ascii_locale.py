"""LANG=C (or a locale this host lacks, which falls back to C): the command line prints ASCII,
each glyph by its meaning; a UTF-8 locale, or none set at all, keeps the glyphs."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]


def variants(**locale: str) -> bytes:
    env = {
        k: v
        for k, v in os.environ.items()
        if k not in ("LANG", "LC_ALL", "LC_CTYPE", "PYTHONUTF8", "PYTHONIOENCODING")
    }
    result = subprocess.run(
        [sys.executable, "-m", "workbench", "variants"],
        capture_output=True,
        env={**env, **locale},
        cwd=REPO,
        timeout=120,
        check=False,
    )
    assert result.returncode == 0, result.stderr
    return result.stdout


def test_the_c_locale_gets_ascii_and_a_utf8_one_the_glyphs() -> None:
    plain = variants(LANG="C")
    assert plain.isascii()
    assert b" x \n" in plain  # the ✗ of a variant this host cannot run, as x
    for name in ("C", "POSIX"):
        assert variants(LC_ALL=name).isascii()
    assert "✗".encode() in variants(LANG="C.UTF-8")
    assert "✗".encode() in variants()  # no locale at all (a bare container): kept

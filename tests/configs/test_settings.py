"""Editing settings.toml: comments kept, atomic writes, bad values refused, file untouched."""

from __future__ import annotations

import subprocess
import sys
import threading
from pathlib import Path

import pytest

from workbench.configs.matrix import load_matrix
from workbench.configs.settings import load_settings, set_setting
from workbench.errors import ConfigError


def test_defaults_load(config_copy: Path) -> None:
    settings = load_settings(config_copy, load_matrix(config_copy))
    assert settings.ninja_jobs == "auto"
    assert settings.nvcc_threads == 1
    assert settings.cuda_architectures == ()
    assert settings.linkage == "cuda-hybrid"


def test_set_keeps_comments_order_and_formatting(config_copy: Path) -> None:
    matrix = load_matrix(config_copy)
    path = config_copy / "settings.toml"
    before = path.read_text()
    set_setting(config_copy, matrix, "nvcc_threads", "8")
    set_setting(config_copy, matrix, "cuda_architectures", "sm_90,12.0")
    after = path.read_text()
    expected = before.replace("nvcc_threads = 1", "nvcc_threads = 8").replace(
        "cuda_architectures = []", 'cuda_architectures = ["90", "120"]'
    )
    assert after == expected
    settings = load_settings(config_copy, matrix)
    assert settings.nvcc_threads == 8
    assert settings.cuda_architectures == ("90", "120")
    assert not list(config_copy.glob(".settings.toml.*"))  # no temp file left behind


def test_inline_comment_survives(config_copy: Path) -> None:
    path = config_copy / "settings.toml"
    path.write_text(path.read_text().replace("nvcc_threads = 1", "nvcc_threads = 1  # keep low"))
    set_setting(config_copy, load_matrix(config_copy), "nvcc_threads", "2")
    assert "nvcc_threads = 2  # keep low" in path.read_text()


@pytest.mark.parametrize(
    ("key", "value", "allowed"),
    [
        ("ninja_jobs", "0", 'a whole number from 1 to 4096, or "auto"'),
        ("ninja_jobs", "-3", "a whole number from 1 to 4096"),
        ("ninja_jobs", "eight", "a whole number"),
        ("ninja_jobs", "2.5", "a whole number"),
        ("nvcc_threads", "0", "a whole number from 1 to 64"),
        ("cuda_architectures", "90,91", "a comma-separated list of: 50, 52"),
        ("linkage", "static", "one of cpu, cuda-hybrid, cuda-dyn, cuda-static"),
        ("ccache", "maybe", "true or false"),
        ("optimization_flags", "-O2 ;rm", "each starting with -"),
        ("cuda_job_memory_gb", "-1", "above 0"),
    ],
)
def test_bad_values_are_refused_and_the_file_is_untouched(
    config_copy: Path, key: str, value: str, allowed: str
) -> None:
    path = config_copy / "settings.toml"
    before = path.read_bytes()
    with pytest.raises(ConfigError) as caught:
        set_setting(config_copy, load_matrix(config_copy), key, value)
    message = str(caught.value)
    assert str(path) in message
    assert key in message and repr(value) in message
    assert allowed in message
    assert path.read_bytes() == before


def test_unknown_key_lists_the_known_ones(config_copy: Path) -> None:
    with pytest.raises(ConfigError, match="unknown setting 'jobs'; settings: ninja_jobs"):
        set_setting(config_copy, load_matrix(config_copy), "jobs", "4")


def test_enabled_patches_moved_to_the_series(config_copy: Path) -> None:
    """An older settings.toml's enabled_patches is refused with where patches live now."""
    with pytest.raises(ConfigError, match=r"patches/series\.toml"):
        set_setting(config_copy, load_matrix(config_copy), "enabled_patches", "fix.patch")
    path = config_copy / "settings.toml"
    path.write_text(path.read_text() + "enabled_patches = []\n")
    line = len(path.read_text().splitlines())
    with pytest.raises(ConfigError, match=rf"settings.toml:{line}:1: 'enabled_patches': patches"):
        load_settings(config_copy, load_matrix(config_copy))


def test_malformed_toml_is_reported_with_line_and_column(config_copy: Path) -> None:
    path = config_copy / "settings.toml"
    lines = path.read_text().splitlines()
    index = next(i for i, line in enumerate(lines) if line.startswith("nvcc_threads"))
    lines[index] = "nvcc_threads = = 2"
    path.write_text("\n".join(lines) + "\n")
    before = path.read_bytes()
    matrix = load_matrix(config_copy)
    with pytest.raises(ConfigError) as caught:
        load_settings(config_copy, matrix)
    assert f"{path}:{index + 1}:" in str(caught.value)
    assert "malformed TOML" in str(caught.value)
    with pytest.raises(ConfigError) as caught:
        set_setting(config_copy, matrix, "ninja_jobs", "4")
    assert f"{path}:{index + 1}:" in str(caught.value)
    assert path.read_bytes() == before


def test_a_bad_value_in_the_file_names_its_line(config_copy: Path) -> None:
    path = config_copy / "settings.toml"
    text = path.read_text().replace("max_jobs = 1", "max_jobs = 0")
    path.write_text(text)
    line = text.splitlines().index("max_jobs = 0") + 1
    with pytest.raises(ConfigError, match=rf"settings.toml:{line}: max_jobs = 0: refused"):
        load_settings(config_copy, load_matrix(config_copy))


def test_malformed_matrix_is_reported(config_copy: Path) -> None:
    path = config_copy / "matrix.toml"
    path.write_text(path.read_text().replace('name = "sm90"', 'name = "sm90'))
    with pytest.raises(ConfigError, match=r"matrix.toml:\d+:\d+: malformed TOML"):
        load_matrix(config_copy)


def test_concurrent_edits_both_land(config_copy: Path) -> None:
    matrix = load_matrix(config_copy)
    errors: list[BaseException] = []

    def edit(key: str, value: str) -> None:
        try:
            for _ in range(20):
                set_setting(config_copy, matrix, key, value)
        except BaseException as exc:  # surfaced below
            errors.append(exc)

    threads = [
        threading.Thread(target=edit, args=("ccache", "true")),
        threading.Thread(target=edit, args=("nvcc_threads", "3")),
    ]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert not errors
    settings = load_settings(config_copy, matrix)
    assert (settings.ccache, settings.nvcc_threads) == (True, 3)


# Issue 29: 47 of 148 config errors named no line (or `settings.toml:None:`), and one spanned
# three lines. Each class: (edit of the file's text, the line and column the error must name).
ERROR_CLASSES = {
    "quoted unknown key": (lambda t: t + '"bogus" = 1\n', "END+1:1", "unknown setting 'bogus'"),
    "single-quoted key": (lambda t: t + "'bogus' = 1\n", "END+1:1", "unknown setting 'bogus'"),
    "dotted unknown key": (lambda t: t + "bogus.x = 1\n", "END+1:1", "unknown setting 'bogus'"),
    "unknown table": (lambda t: t + "[bogus]\nx = 1\n", "END+1:2", "unknown setting 'bogus'"),
    "a table where a value belongs": (
        lambda t: t.replace('ninja_jobs = "auto"\n', "") + "[ninja_jobs]\na = 1\nb = 2\n",
        "[ninja_jobs]",
        "ninja_jobs = {a = 1, b = 2}: refused",
    ),
    "a missing key": (
        lambda t: t.replace("max_jobs = 1\n", ""),
        "END-1",
        "setting 'max_jobs' is missing",
    ),
    "at end of document": (lambda t: t + "trailing", "END+1:9", "at the end of the file"),
}


@pytest.mark.parametrize("case", list(ERROR_CLASSES))
def test_every_config_error_is_one_line_naming_line_and_column(
    config_copy: Path, case: str
) -> None:
    from cli_errors import one_error_line

    path = config_copy / "settings.toml"
    text = path.read_text()
    edit, where, said = ERROR_CLASSES[case]
    end = text.count("\n")  # the file ends with a newline: END+1 is the first added line
    new = edit(text)
    path.write_text(new)
    if where == "END-1":  # the changed file's last line
        where = str(new.rstrip("\n").count("\n") + 1)
    elif where.startswith("["):  # the table's header line
        where = str(new.splitlines().index(where) + 1)
    else:
        line, _, column = where.partition(":")
        where = f"{end + int(line[4:])}:{column}"
    error = one_error_line(_cli(config_copy, "config", "show"))
    assert error.startswith(f"workbench: error: {path}:{where}:"), error
    assert said in error, error


def test_bad_utf8_names_line_and_column_not_a_byte_offset(config_copy: Path) -> None:
    from cli_errors import one_error_line

    path = config_copy / "settings.toml"
    data = path.read_bytes()
    lines = data.split(b"\n")
    index = next(i for i, line in enumerate(lines) if line.startswith(b"max_jobs"))
    lines[index] += b" # caf\xe9"
    path.write_bytes(b"\n".join(lines))
    error = one_error_line(_cli(config_copy, "config", "show"))
    column = len(lines[index]) - 1 + 1  # the bad byte is the last
    assert error.startswith(f"workbench: error: {path}:{index + 1}:{column}: not UTF-8"), error
    assert "at byte" not in error


def _cli(config: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "workbench", "--config", str(config), *args],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )

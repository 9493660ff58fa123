"""Editing settings.toml: comments kept, atomic writes, bad values refused, file untouched."""

from __future__ import annotations

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
    with pytest.raises(ConfigError, match=rf"settings.toml:{line}: 'enabled_patches': patches"):
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

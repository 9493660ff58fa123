"""patches/series.toml: validation with file and line, selection per package, atomic edits."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from patch_fixture import GOOD, write_fixture_series, write_fixture_source

from workbench.configs.matrix import Matrix, load_matrix
from workbench.errors import ConfigError, PatchError
from workbench.patches.series import (
    NewPatch,
    add_patch,
    load_series,
    series_path,
    set_enabled,
    target_name,
    validate_name,
)

REPO = Path(__file__).resolve().parents[2]
ENTRY = """[[patches]]
name = "{name}"
file = "{name}.patch"
group = "local"
fixes = "something"
flavours = {flavours}
variants = {variants}
enabled = {enabled}
"""


def _write(config: Path, *entries: str) -> Path:
    path = series_path(config)
    path.write_text("# a series\n\n" + "\n".join(entries))
    return path


def _entry(name: str, flavours: str = "[]", variants: str = "[]", enabled: str = "true") -> str:
    return ENTRY.format(name=name, flavours=flavours, variants=variants, enabled=enabled)


def test_the_repository_series_is_the_static_flavours() -> None:
    matrix = load_matrix(REPO / "configs")
    series = load_series(REPO / "configs", matrix)
    names = [p.name for p in series.applied_to("cuda-static")]
    assert names[:2] == ["static-init-bridge", "static-init-cpu"] and len(names) == 8
    assert series.applied_to("cpu") == [] and series.applied_to("cuda-dyn") == []
    assert series.applied_to("onnxruntime-python313-cuda12_9-sm90-avx512") == []


def test_selection_keeps_series_order_and_skips_disabled(config_copy: Path) -> None:
    matrix = load_matrix(config_copy)
    _write(
        config_copy,
        _entry("zeta", flavours='["cpu"]'),
        _entry("alpha", variants='["onnxruntime-python313-cuda12_9-*"]'),
        _entry("mid", flavours='["cpu", "cuda-static"]', variants='["*"]'),
        _entry("off", flavours='["cpu"]', enabled="false"),
    )
    series = load_series(config_copy, matrix)
    assert [p.name for p in series.applied_to("cpu")] == ["zeta", "mid"]
    assert [p.name for p in series.applied_to("cuda-static")] == ["mid"]
    cuda = "onnxruntime-python313-cuda12_9-sm90-avx512"
    assert [p.name for p in series.applied_to(cuda)] == ["alpha", "mid"]
    assert [p.name for p in series.applied_to("onnxruntime-python313-cpu-avx2")] == ["mid"]
    assert series.get("off").applies_to("cpu", flavour=True) and not series.get("off").enabled
    assert [p.name for p in series.for_target("cpu")] == ["zeta", "mid", "off"]


@pytest.mark.parametrize(
    ("entry", "key", "expected"),
    [
        (_entry("Bad Name"), "name", "name = 'Bad Name'"),
        (_entry("x", flavours='["gpu"]'), "flavours", "flavours = 'gpu': not a flavour"),
        (_entry("x", variants='["onnxruntime-python399-*"]'), "variants", "matches no variant"),
        (_entry("x", variants='["a?b"]'), "variants", "'_', '-' and '*' only"),
        (_entry("x", enabled='"yes"'), "enabled", "enabled = 'yes': true or false"),
        (_entry("x") + 'colour = "red"\n', "colour", "colour = 'red': unknown key"),
        (_entry("x").replace('group = "local"\n', ""), "[[patches]]", "key 'group' is missing"),
        (_entry("x").replace('"x.patch"', '"../x.patch"'), "file", "no directories"),
    ],
)
def test_bad_entries_name_file_line_and_what_is_allowed(
    config_copy: Path, entry: str, key: str, expected: str
) -> None:
    path = _write(config_copy, _entry("first"), entry)
    lines = path.read_text().splitlines()
    second = [n for n, text in enumerate(lines, 1) if text.startswith("[[patches]]")][1]
    line = next(n for n, text in enumerate(lines, 1) if n >= second and text.startswith(key))
    with pytest.raises(ConfigError) as error:
        load_series(config_copy, load_matrix(config_copy))
    message = str(error.value)
    assert message.startswith(f"{path}:{line}: patch ") and expected in message, message


def test_duplicate_names_are_refused(config_copy: Path) -> None:
    path = _write(config_copy, _entry("same"), _entry("same"))
    expected = f"{path}:12: patch name 'same' is used twice (first at line 3)"
    with pytest.raises(ConfigError, match=re.escape(expected)):
        load_series(config_copy, load_matrix(config_copy))


def test_malformed_toml_names_line_and_column(config_copy: Path) -> None:
    path = series_path(config_copy)
    path.write_text('[[patches]]\nname = "x\n')
    with pytest.raises(ConfigError, match=rf"{path}:2:\d+: malformed TOML"):
        load_series(config_copy)


def test_enable_and_disable_keep_comments(config_copy: Path, tmp_path: Path) -> None:
    matrix = load_matrix(config_copy)
    write_fixture_series(config_copy, _source(tmp_path))
    path = series_path(config_copy)
    before = path.read_text()
    series = set_enabled(config_copy, "gone-file", True, matrix)
    assert series.get("gone-file").enabled
    after = path.read_text()
    assert after.startswith("# The fixture's patch series")
    assert after.count("enabled = true") == before.count("enabled = true") + 1
    set_enabled(config_copy, "gone-file", False, matrix)
    assert path.read_text() == before
    with pytest.raises(ConfigError, match=r"no patch named 'nope'.*tune-light-3"):
        set_enabled(config_copy, "nope", True, matrix)
    assert path.read_text() == before


def _source(tmp_path: Path) -> Path:
    source = tmp_path / "source"
    write_fixture_source(source, units=14)
    return source


def test_add_patch_writes_file_and_entry_or_neither(config_copy: Path, tmp_path: Path) -> None:
    matrix: Matrix = load_matrix(config_copy)
    write_fixture_series(config_copy, _source(tmp_path))
    path = series_path(config_copy)
    before = path.read_text()
    added = add_patch(
        config_copy, NewPatch("fix-one", "local", "one fix", ("cpu",)), "--- a/x\n", matrix
    )
    series = load_series(config_copy, matrix)
    assert series.patches[-1] == added and added.file == "fix-one.patch"
    assert (path.parent / "fix-one.patch").read_text() == "--- a/x\n"
    assert path.read_text().startswith(before)
    # Refused: a name in use, a bad name, an unknown flavour. Nothing is written.
    for new, expected in [
        (NewPatch(GOOD[0], "local", "again", ("cpu",)), "already in the series"),
        (NewPatch("Bad!", "local", "x", ("cpu",)), "is not a patch name"),
        (NewPatch("fine", "local", "x", ("gpu",)), "not a flavour"),
    ]:
        text = path.read_text()
        with pytest.raises((PatchError, ConfigError), match=expected):
            add_patch(config_copy, new, "--- a/x\n", matrix)
        assert path.read_text() == text
        assert not (path.parent / "fine.patch").exists()


def test_names_and_targets() -> None:
    assert validate_name("fix-datatype-loop") == "fix-datatype-loop"
    for bad in ("", "-x", "Fix", "a b", "x/y"):
        with pytest.raises(PatchError, match="is not a patch name"):
            validate_name(bad)
    with pytest.raises(PatchError, match=r"without \.patch"):
        validate_name("fix.patch")
    matrix = load_matrix(REPO / "configs")
    assert target_name(matrix, "onnxruntime") == "cuda-static"
    assert target_name(matrix, "cpu") == "cpu"
    with pytest.raises(Exception, match="onnxruntime-python313-cpu-avx2"):
        target_name(matrix, "onnxruntime-python313-cpu-avx3")

"""`patches check`: the series applied in order to a scratch copy, per patch and per hunk."""

from __future__ import annotations

import filecmp
from pathlib import Path

import pytest
from needed_tools import needs
from patch_fixture import copy_tree, write_fixture_series, write_fixture_source

from workbench.configs.matrix import load_matrix
from workbench.errors import PatchError
from workbench.patches.checking import (
    ALREADY_APPLIED,
    APPLIES,
    CONTEXT_CHANGED,
    FAILS,
    FILE_MISSING,
    PATCH_MISSING,
    UNREADABLE,
    check_patch_in_place,
    check_series,
    render_check,
)
from workbench.patches.series import load_series

pytestmark = needs("git")


@pytest.fixture
def fixture(config_copy: Path, tmp_path: Path):
    source = tmp_path / "source"
    write_fixture_source(source)
    write_fixture_series(config_copy, source, broken_enabled=True)
    return load_series(config_copy, load_matrix(config_copy)), source


def _same_tree(left: Path, right: Path) -> bool:
    comparison = filecmp.dircmp(left, right)
    return not (comparison.left_only or comparison.right_only or comparison.diff_files)


def test_each_patch_and_hunk_says_what_happens(fixture, tmp_path: Path) -> None:
    series, source = fixture
    pristine = copy_tree(source, tmp_path / "pristine")
    result = check_series(series, series.patches, source)
    by_name = {p.name: p for p in result.patches}
    assert [p.name for p in result.patches] == [p.name for p in series.patches]
    assert by_name["tune-light-3"].status == APPLIES
    assert by_name["tune-light-7"].status == APPLIES
    assert by_name["already-upstream"].status == ALREADY_APPLIED

    stale = by_name["stale-context"]
    assert stale.status == FAILS and stale.detail == "1 of 2 hunks do not apply"
    assert [(h.path, h.status) for h in stale.hunks] == [
        ("light_10.cc", APPLIES),
        ("light_9.cc", CONTEXT_CHANGED),
    ]
    assert stale.hunks[1].detail == (
        "light_9.cc:8 reads '    int digits = static_cast<int>(std::to_string(x).size());'; "
        "the patch expects '    int digits = static_cast<int>(1);'"
    )
    gone = by_name["gone-file"]
    assert gone.status == FAILS
    assert [(h.path, h.status) for h in gone.hunks] == [("gone.cc", FILE_MISSING)]
    assert not result.ok
    # The tree itself is untouched.
    assert _same_tree(source, pristine)

    text = render_check(result)
    assert "stale-context     fails (1 of 2 hunks do not apply)" in text
    assert "hunk #2 light_9.cc @@ -6,5 +6,5 @@ int light_9(int x) {: context changed" in text
    assert text.endswith("Do not apply cleanly: stale-context, already-upstream, gone-file.")
    document = result.to_json()
    assert document["ok"] is False and document["patches"][2]["hunks"][1]["status"] == (
        CONTEXT_CHANGED
    )


def test_later_patches_see_the_earlier_ones(config_copy: Path, fixture, tmp_path: Path) -> None:
    """A patch written on top of an earlier one applies only after it, as in the flake."""
    series, source = fixture
    directory = series.directory
    first = (directory / "tune-light-3.patch").read_text()
    # The same file changed again, on top of tune-light-3's change.
    on_top = first.replace(
        "-    return std::accumulate(values.begin(), values.end(), 0) + digits;\n",
        "-    return std::accumulate(values.begin(), values.end(), 0) + 3;\n",
    ).replace(
        "+    return std::accumulate(values.begin(), values.end(), 0) + 3;\n",
        "+    return std::accumulate(values.begin(), values.end(), 0) + 33;\n",
    )
    assert on_top != first
    (directory / "on-top.patch").write_text(on_top)
    with (directory / "series.toml").open("a") as series_file:
        series_file.write(
            '\n[[patches]]\nname = "on-top"\nfile = "on-top.patch"\ngroup = "local"\n'
            'fixes = "x"\nflavours = ["cpu"]\nvariants = []\nenabled = true\n'
        )
    series = load_series(config_copy, load_matrix(config_copy))
    ordered = [series.get("tune-light-3"), series.get("on-top")]
    assert [p.status for p in check_series(series, ordered, source).patches] == [APPLIES] * 2
    alone = check_series(series, [series.get("on-top")], source).patches[0]
    assert alone.status == FAILS and alone.hunks[0].status == CONTEXT_CHANGED


def test_missing_and_unreadable_patch_files(config_copy: Path, fixture) -> None:
    series, source = fixture
    (series.directory / "tune-light-7.patch").unlink()
    (series.directory / "tune-light-3.patch").write_text("this is not a diff\n")
    result = check_series(series, series.patches[:2], source)
    assert [p.status for p in result.patches] == [UNREADABLE, PATCH_MISSING]
    assert "not a unified diff" in result.patches[0].detail or "no file changes" in (
        result.patches[0].detail
    )
    with pytest.raises(PatchError, match="not a directory"):
        check_series(series, series.patches, source / "nope")


def test_in_place_check_leaves_the_tree_alone(fixture, tmp_path: Path) -> None:
    series, source = fixture
    pristine = copy_tree(source, tmp_path / "pristine")
    assert check_patch_in_place(source, series.directory / "tune-light-3.patch").ok
    stale = check_patch_in_place(source, series.directory / "stale-context.patch")
    assert stale.name == "stale-context" and stale.failing()[0].path == "light_9.cc"
    assert _same_tree(source, pristine)

"""The ORT_STATIC_PROVIDERS guard written as a patch that real `git apply` accepts."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

from workbench.debugging.bridge.bridge_patch import (
    BRIDGE_FILE,
    build_patch,
    default_patch_name,
    find_definitions,
    write_patch,
)
from workbench.debugging.debug_errors import DebugError
from workbench.debugging.model import BridgePair

# A stand-in for ORT's provider_bridge_provider.cc: the same shapes of definitions (one-line
# and multi-line specialisations, a method with nested blocks), made self-contained so that
# g++ can compile it before and after the patch.
FAKE_BRIDGE = """\
// Copyright (c) Microsoft Corporation. All rights reserved. (stand-in for the tests)
#include <cstddef>
#include <cstdint>

namespace onnxruntime {
struct DataTypeImplBase;
struct Tensor;
using MLDataType = const DataTypeImplBase*;
struct DataTypeImpl {
  template <typename T>
  static MLDataType GetType();
};
struct TensorShape {
  int64_t SizeHelper(size_t start, size_t end) const;
};
struct ProviderHost {
  virtual MLDataType DataTypeImpl__GetType_Tensor() = 0;
  virtual MLDataType DataTypeImpl__GetType_float() = 0;
  virtual MLDataType DataTypeImpl__GetType_double() = 0;
  virtual int64_t TensorShape__SizeHelper(const TensorShape* p, size_t start, size_t end) = 0;
};
ProviderHost* Provider_GetHost();
static ProviderHost* g_host = nullptr;

template <>
MLDataType DataTypeImpl::GetType<Tensor>() { return Provider_GetHost()->DataTypeImpl__GetType_Tensor(); }
template <>
MLDataType DataTypeImpl::GetType<float>() { return Provider_GetHost()->DataTypeImpl__GetType_float(); }
template <>
MLDataType DataTypeImpl::GetType<double>() {
  // "{ not a brace }" in a string and a comment must not confuse the scanner
  return Provider_GetHost()->DataTypeImpl__GetType_double();
}

int64_t TensorShape::SizeHelper(size_t start, size_t end) const {
  if (start > end) {
    return 0;
  }
  return g_host->TensorShape__SizeHelper(this, start, end);
}
}  // namespace onnxruntime
"""  # noqa: E501 - the one-line definitions are ORT's own layout


def pair(counterpart: str, host: str) -> BridgePair:
    cls, method = counterpart.split("::")
    return BridgePair(
        host_method=f"ProviderHostImpl::{host}",
        counterpart=counterpart,
        bridge_class=cls,
        bridge_method=method,
    )


FLOAT = pair("DataTypeImpl::GetType<float>", "DataTypeImpl__GetType_float")
DOUBLE = pair("DataTypeImpl::GetType<double>", "DataTypeImpl__GetType_double")
SIZE = pair("TensorShape::SizeHelper", "TensorShape__SizeHelper")


@pytest.fixture
def ort_tree(tmp_path: Path) -> Path:
    if shutil.which("git") is None:
        pytest.skip("git is not installed")
    source = tmp_path / "onnxruntime-src"
    bridge = source / BRIDGE_FILE
    bridge.parent.mkdir(parents=True)
    bridge.write_text(FAKE_BRIDGE)
    return source


def git_apply(source: Path, patch: Path, check: bool) -> subprocess.CompletedProcess[str]:
    argv = ["git", "apply", *(["--check"] if check else []), str(patch)]
    return subprocess.run(argv, cwd=source, capture_output=True, text=True, check=False)


def test_written_patch_applies_and_guards_exactly_the_definition(
    ort_tree: Path, tmp_path: Path
) -> None:
    patches = tmp_path / "patches"
    proposal = write_patch(FLOAT, ort_tree, patches)

    written = patches / "static-datatypeimpl-gettype-float-loop.patch"
    assert proposal.path == str(written) and written.is_file()
    assert git_apply(ort_tree, written, check=True).returncode == 0
    assert git_apply(ort_tree, written, check=False).returncode == 0
    lines = (ort_tree / BRIDGE_FILE).read_text().splitlines()
    start = next(
        i for i, line in enumerate(lines) if line.startswith("#ifndef ORT_STATIC_PROVIDERS")
    )
    assert lines[start + 1] == "template <>"
    assert "DataTypeImpl__GetType_float" in lines[start + 2]
    assert lines[start + 3] == "#endif  // ORT_STATIC_PROVIDERS"
    assert sum(line.startswith("#ifndef") for line in lines) == 1


def test_patched_file_still_compiles_with_and_without_the_define(
    ort_tree: Path, tmp_path: Path
) -> None:
    if shutil.which("g++") is None:
        pytest.skip("g++ is not installed")
    write_patch(DOUBLE, ort_tree, tmp_path / "patches")
    assert (
        git_apply(
            ort_tree, tmp_path / "patches" / default_patch_name(DOUBLE), check=False
        ).returncode
        == 0
    )
    for flags in ([], ["-DORT_STATIC_PROVIDERS"]):
        done = subprocess.run(
            ["g++", "-std=c++17", "-fsyntax-only", *flags, str(ort_tree / BRIDGE_FILE)],
            capture_output=True,
            text=True,
            check=False,
        )
        assert done.returncode == 0, done.stderr


def test_multi_line_definitions_with_nested_blocks_are_guarded_whole(ort_tree: Path) -> None:
    text = (ort_tree / BRIDGE_FILE).read_text()
    [definition] = find_definitions(text, "TensorShape__SizeHelper")
    lines = text.splitlines()
    assert lines[definition.first].startswith("int64_t TensorShape::SizeHelper")
    assert lines[definition.last] == "}"
    [double] = find_definitions(text, "DataTypeImpl__GetType_double")
    assert lines[double.first] == "template <>" and lines[double.last] == "}"
    patch, _ = build_patch(SIZE, ort_tree)
    assert "+#ifndef ORT_STATIC_PROVIDERS" in patch and "+#endif  // ORT_STATIC_PROVIDERS" in patch


def test_an_already_guarded_definition_is_reported_not_patched(
    ort_tree: Path, tmp_path: Path
) -> None:
    write_patch(FLOAT, ort_tree, tmp_path / "patches")
    git_apply(ort_tree, tmp_path / "patches" / default_patch_name(FLOAT), check=False)
    with pytest.raises(DebugError, match="already inside #ifndef ORT_STATIC_PROVIDERS"):
        build_patch(FLOAT, ort_tree)


def test_bad_names_missing_trees_and_clashes_are_refused(ort_tree: Path, tmp_path: Path) -> None:
    patches = tmp_path / "patches"
    with pytest.raises(DebugError, match="not a valid patch name"):
        write_patch(FLOAT, ort_tree, patches, name="../evil.patch")
    with pytest.raises(DebugError, match="does not look like an ONNX Runtime source tree"):
        write_patch(FLOAT, tmp_path / "nowhere", patches)
    missing = pair("DataTypeImpl::GetType<int8_t>", "DataTypeImpl__GetType_int8")
    with pytest.raises(DebugError, match="no definition calling DataTypeImpl__GetType_int8"):
        write_patch(missing, ort_tree, patches)
    patches.mkdir()
    (patches / "taken.patch").write_text("something else\n")
    with pytest.raises(DebugError, match="exists with other content"):
        write_patch(FLOAT, ort_tree, patches, name="taken.patch")
    # Writing the same patch twice is fine.
    write_patch(FLOAT, ort_tree, patches, name="same.patch")
    write_patch(FLOAT, ort_tree, patches, name="same.patch")

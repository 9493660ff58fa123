"""Shared fixtures: a private copy of the configs, the nvidia-smi stand-in, the repo's paths."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from workbench.configs.matrix import Matrix, load_matrix

REPO = Path(__file__).resolve().parent.parent
STANDIN_NVIDIA_SMI = REPO / "tests" / "standins" / "standin-nvidia-smi"
NVIDIA_SMI_FIXTURES = REPO / "tests" / "standins" / "nvidia-smi-fixtures"


@pytest.fixture(scope="session")
def matrix() -> Matrix:
    return load_matrix(REPO / "configs")


@pytest.fixture(autouse=True)
def private_user_config(tmp_path_factory: pytest.TempPathFactory, monkeypatch: pytest.MonkeyPatch):
    """Each test's own per-user config directory (workbench.user_settings), empty at first:
    the settings of the user running the suite never reach a test, nor a test's theirs."""
    directory = tmp_path_factory.mktemp("user-config")
    monkeypatch.setenv("WORKBENCH_USER_CONFIG_DIR", str(directory))
    return directory


@pytest.fixture
def config_copy(tmp_path: Path) -> Path:
    """A writable copy of configs/ (with an empty patches/ beside it)."""
    directory = tmp_path / "configs"
    shutil.copytree(REPO / "configs", directory)
    (tmp_path / "patches").mkdir()
    return directory


@pytest.fixture
def nvidia_smi(monkeypatch: pytest.MonkeyPatch):
    """Point the nvidia-smi stand-in at a recorded fixture; returns the stand-in's path."""

    def use(fixture: str) -> str:
        monkeypatch.setenv("STANDIN_NVIDIA_SMI_FIXTURE", str(NVIDIA_SMI_FIXTURES / fixture))
        return str(STANDIN_NVIDIA_SMI)

    return use


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo):
    """A failed snapshot's report says which rows differ (CI keeps no HTML report)."""
    outcome = yield
    report = outcome.get_result()
    if call.when != "call" or not report.failed or "snap_compare" not in item.fixturenames:
        return
    import pickle

    from pytest_textual_snapshot import node_to_report_path
    from snapshot_diff import describe_difference

    try:
        data = pickle.loads(node_to_report_path(item).read_bytes())
        report.sections.append(("snapshot difference", describe_difference(data[1], data[2])))
    except Exception as exc:  # a report must not fail for want of its explanation
        report.sections.append(("snapshot difference", f"not available: {exc!r}"))

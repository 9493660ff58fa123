"""s3:// pushes with a Nix built without S3 support (Debian's nix-bin 2.8 is: it cannot open any
s3:// store): refused before anything starts, in one `workbench: error:` line saying so, whether
the store comes from `push --to` or from hosts.toml's push_to (then before the build, naming the
file and line). Real Nix is asked; where it has S3 support these refusals cannot be shown.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from cache_flake import make_cache_flake
from needed_tools import needs
from nix_testing import NIX_CONFIG
from recorded_builds import new_build
from supervised import Bench

from workbench.planning.launch import host_platform
from workbench.supervision.pushing import s3_support_problem

pytestmark = [
    pytest.mark.nix,
    needs("nix", debian="nix-bin"),
]
BUCKET = "s3://onnxruntime-builds?region=eu-west-1"


@pytest.fixture
def without_s3() -> str:
    """Nix's own words that it cannot open an s3:// store (asked of the real Nix)."""
    problem = s3_support_problem()
    if problem is None:
        pytest.skip("this Nix has S3 support: it would try the push, not refuse it")
    return problem


def _one_error(stderr: str) -> str:
    lines = stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("workbench: error: "), stderr
    assert "Traceback" not in stderr
    return lines[0]


def test_a_push_to_s3_is_refused_before_it_starts(
    bench: Bench, tmp_path: Path, without_s3: str
) -> None:
    with bench.history() as history:
        record = history.create(
            new_build("cpu", backend="nix", argv=("nix", "build"), cwd=str(tmp_path), eta_key="cpu")
        )
    configs = tmp_path / "configs"
    configs.mkdir()
    (configs / "hosts.toml").write_text("local_builds = true\n")
    refused = bench.run("--config", str(configs), "push", str(record.id), "--to", BUCKET)
    assert refused.returncode == 2
    line = _one_error(refused.stderr)
    assert line.startswith(f"workbench: error: --to '{BUCKET}': this Nix (nix (Nix) "), line
    assert "was built without S3 support" in line and "don't know how to open Nix store" in line
    assert "allowed here: file:///ABSOLUTE/PATH" in line
    with bench.history() as history:  # nothing started: no push build
        assert [b.id for b in history.builds(limit=10)] == [record.id]


def test_a_push_to_from_hosts_toml_to_s3_refuses_the_build_naming_the_line(
    bench: Bench, tmp_path: Path, without_s3: str
) -> None:
    flake = make_cache_flake(tmp_path / "flake", host_platform())
    bench.extra_env["NIX_CONFIG"] = NIX_CONFIG
    hosts = flake / "configs" / "hosts.toml"
    text = hosts.read_text()
    hosts.write_text(
        text.replace("local_builds = true", f'local_builds = true\npush_to = "{BUCKET}"')
    )
    line_number = hosts.read_text().splitlines().index(f'push_to = "{BUCKET}"') + 1
    refused = bench.run("--config", str(flake / "configs"), "build", "cpu", "-C", str(flake))
    assert refused.returncode == 2, refused.stderr
    line = _one_error(refused.stderr)
    assert line.startswith(
        f"workbench: error: {hosts}:{line_number}: push_to = '{BUCKET}': this Nix "
    ), line
    assert without_s3 in line
    if (bench.state / "history.sqlite3").exists():  # refused before the build was created
        with bench.history() as history:
            assert not history.builds(limit=5)

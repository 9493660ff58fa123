"""Builders of two derivations with the same name, one this build's: told apart by the store path
each builds (`out` in its environment) against the outputs of this build's `.drv`, where the
environment can be read (root here); by name alone, which cannot tell them apart, otherwise.
Real processes, run as a real Nix build user, with the environment a Nix builder has."""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterator
from pathlib import Path

import pytest
from needed_tools import needs
from nix_testing import as_build_user, held_build_user

from workbench.monitor import Sampler
from workbench.monitor.derivation_file import scratch_path

pytestmark = [
    pytest.mark.skipif(os.geteuid() != 0, reason="running as a Nix build user needs root"),
    needs("runuser", debian="util-linux"),
]

NAME = "wb-attr-same-1.0"
OURS = f"/nix/store/{'a' * 32}-{NAME}"
THEIRS = f"/nix/store/{'b' * 32}-{NAME}"
# Our derivation's file, and where its builder writes when Nix builds it again (`--rebuild`).
OUR_DRV = f"{'d' * 32}-{NAME}.drv"
AGAIN = scratch_path(f"/nix/store/{OUR_DRV}", OURS)


@pytest.fixture
def builders() -> Iterator[dict[str, int]]:
    """Processes as a Nix build user, each with a builder's `name` and `out`: the same name,
    three store paths ("ours", "again": ours built again, "theirs") -> the pid of each."""
    with held_build_user() as user, contextlib.ExitStack() as stack:
        yield {
            which: stack.enter_context(
                as_build_user(
                    user,
                    ["env", "-i", f"name={NAME}", f"out={out}", "/bin/sleep", "120"],
                    name="sleep",  # env execs it
                )
            )
            for which, out in (("ours", OURS), ("again", AGAIN), ("theirs", THEIRS))
        }


def _drv(folder: Path, out: str) -> str:
    """A derivation file (as Nix writes one) that builds `out`, named as ours is."""
    path = folder / OUR_DRV
    path.write_text(
        f'Derive([("out","{out}","","")],[],[],"x86_64-linux","/bin/sh",["-c","true"],'
        f'[("name","{NAME}"),("out","{out}")])'
    )
    return str(path)


def _counted(sampler: Sampler, builders: dict[str, int]) -> set[str]:
    pids = {p.pid: p.derivation for p in sampler.sample().processes}
    assert all(pids.get(pid) in (None, NAME) for pid in builders.values())
    return {which for which, pid in builders.items() if pid in pids}


def test_a_builder_of_another_derivation_with_the_same_name_is_not_this_build_s(
    builders: dict[str, int], tmp_path: Path
) -> None:
    with Sampler(daemon=True, names_to_come=True) as sampler:
        assert _counted(sampler, builders) == set()  # anyone's, until the log names the build's
        sampler.add_derivations(drv_paths=[_drv(tmp_path, OURS)])
        assert _counted(sampler, builders) == {"ours", "again"}
        assert _counted(sampler, builders) == {"ours", "again"}


def test_by_name_alone_same_named_builders_cannot_be_told_apart(
    builders: dict[str, int], tmp_path: Path
) -> None:
    """The fallback (a derivation known by name, or its `.drv` unreadable): both count."""
    with Sampler(daemon=True, names_to_come=True) as sampler:
        sampler.add_derivations(drv_paths=[str(tmp_path / f"{'c' * 32}-{NAME}.drv")])
        assert _counted(sampler, builders) == {"ours", "again", "theirs"}
    with Sampler(daemon=True, derivations=[NAME]) as sampler:
        assert _counted(sampler, builders) == {"ours", "again", "theirs"}

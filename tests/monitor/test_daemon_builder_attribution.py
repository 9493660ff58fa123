"""Which `nixbld*` processes a supervisor's sampler counts as its build's: a daemon serves every
user, so a builder counts only once its derivation is known to be this build's, and its
derivation is read from what any user may read (its arguments) when its environment and working
directory are closed to the supervisor's user. Real processes, run as a real build user."""

from __future__ import annotations

import os
from collections.abc import Iterator

import pytest
from needed_tools import needs
from nix_testing import as_build_user, held_build_user

from workbench.monitor import Sampler
from workbench.monitor.discovery import derivation_in_argv

pytestmark = [
    pytest.mark.skipif(os.geteuid() != 0, reason="running as a Nix build user needs root"),
    needs("runuser", debian="util-linux"),
]


def test_a_build_directory_in_the_arguments_names_the_derivation() -> None:
    compile_line = ["g++", "-c", "/tmp/nix-build-ort-1.23.2.drv-0/source/a.cc", "-o", "a.o"]
    assert derivation_in_argv(compile_line) == "ort-1.23.2"
    assert derivation_in_argv(["ninja", "-C", "build"]) is None
    two = ["cp", "/tmp/nix-build-a.drv-0/x", "/tmp/nix-build-b.drv-1/y"]
    assert derivation_in_argv(two) is None  # which one: not known, so not claimed
    assert derivation_in_argv(["/tmp/nix-build-a.drv-0/tool"]) is None  # argv[0] is the program


@pytest.fixture
def builder() -> Iterator[int]:
    """A process running as a Nix build user whose arguments name the build directory of
    `wb-attr-x`; the user held as Nix holds its builders' (another test's Nix build would kill
    every process of the user it takes)."""
    with (
        held_build_user() as user,
        as_build_user(
            user, ["sh", "-c", "sleep 120; :", "/tmp/nix-build-wb-attr-x.drv-0/src/a.cc"]
        ) as pid,
    ):
        yield pid


def _seen(sampler: Sampler, pid: int) -> list[str | None]:
    return [p.derivation for p in sampler.sample().processes if p.pid == pid]


def test_a_supervisor_counts_a_daemon_builder_only_once_its_derivation_is_known(
    builder: int,
) -> None:
    with Sampler(daemon=True, names_to_come=True) as sampler:
        assert _seen(sampler, builder) == []  # anyone's, until the log names this build's
        sampler.add_derivations(["wb-attr-other"])
        assert _seen(sampler, builder) == []  # another derivation: another build's
        sampler.add_derivations(["wb-attr-x"])
        assert _seen(sampler, builder) == ["wb-attr-x"]


def test_without_names_to_come_every_daemon_builder_counts_at_once(builder: int) -> None:
    with Sampler(daemon=True) as sampler:
        assert _seen(sampler, builder) == ["wb-attr-x"]

"""Reading Nix's dry-run plan: the words of Debian's Nix 2.8 (`nix build --dry-run`, recorded
here on 2026-11-26 from a flake of two derivations, one of them in a file:// binary cache)."""

from __future__ import annotations

from workbench.flake.nix_plan import NixPlan, ToBuild, ToFetch, parse_dry_run

SINGULAR = """\
this derivation will be built:
  /nix/store/n9yh6nv0ayckv1p0mcac3k4kg5gk8zfr-plx-top.drv
this path will be fetched (0.29 MiB download, 0.29 MiB unpacked):
  /nix/store/sm69g22hdl3h8w4zvxahc3smlwj2i5y3-plx-dep
"""

PLURAL = """\
warning: Git tree '/tmp/plx' is dirty
these 2 derivations will be built:
  /nix/store/qsrjz3pjida2daqwkklj17xf2381bcca-plx-dep.drv
  /nix/store/gqj38njvbrs3827n5jn3ydj5pzjdhvfs-plx-top.drv
these 3 paths will be fetched (12.50 MiB download, 40.25 MiB unpacked):
  /nix/store/sm69g22hdl3h8w4zvxahc3smlwj2i5y3-plx-a
  /nix/store/4qjbazfnsmj31d79jvdh36k0m3gz75zs-plx-b
  /nix/store/bkcszrxncmb947ffinm523whsdysn7wq-plx-c
error: this line is not a path
"""


def test_one_derivation_and_one_path() -> None:
    parsed = parse_dry_run(SINGULAR)
    assert parsed.to_build == ("/nix/store/n9yh6nv0ayckv1p0mcac3k4kg5gk8zfr-plx-top.drv",)
    assert parsed.to_fetch == ("/nix/store/sm69g22hdl3h8w4zvxahc3smlwj2i5y3-plx-dep",)
    assert (parsed.download_mib, parsed.unpacked_mib) == (0.29, 0.29)


def test_several_with_other_lines_around() -> None:
    parsed = parse_dry_run(PLURAL)
    assert [path.rsplit("-", 1)[1] for path in parsed.to_build] == ["dep.drv", "top.drv"]
    assert [path.rsplit("-", 1)[1] for path in parsed.to_fetch] == ["a", "b", "c"]
    assert (parsed.download_mib, parsed.unpacked_mib) == (12.5, 40.25)


def test_nothing_to_do() -> None:
    parsed = parse_dry_run("")
    assert parsed.to_build == parsed.to_fetch == ()
    assert parsed.download_mib is None


def test_the_summary_says_what_is_known_and_what_is_not() -> None:
    plan = NixPlan(
        (".#top",), True, "",
        (ToBuild("/nix/store/" + "a" * 32 + "-top.drv", 75.2, 4),
         ToBuild("/nix/store/" + "b" * 32 + "-new.drv", None, None)),
        (ToFetch("/nix/store/" + "c" * 32 + "-dep", "file:///c", 300192, 300120),
         ToFetch("/nix/store/" + "d" * 32 + "-odd", None, None, None)),
        0.29, 0.29, ("file:///c",),
    )  # fmt: skip
    assert plan.lines() == [
        "Nix's plan: 2 to build (last time 1m15s for 1 of them; 1 never built here), "
        "2 to fetch (0.29 MiB download, 0.29 MiB unpacked)",
        "  build top: last 1m15s (build #4)",
        "  build new: never built here",
        "  fetch dep: 293.2 KiB from file:///c",
        "  fetch odd: size not known from no configured substituter answered for it",
    ]
    assert plan.download_bytes() is None  # one size is not known: no total pretends it is
    failed = NixPlan((".#x",), False, "flake has no x", (), (), None, None, ())
    assert failed.lines() == ["Nix's plan: not known (flake has no x)"]

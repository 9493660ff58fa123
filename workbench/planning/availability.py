"""Whether a variant or flavour can be built from the nixpkgs pin, and what to build if not.

The facts live in configs/matrix.toml's [nixpkgs_pin] (the CUDA package sets nixpkgs has at that
revision); nix/variants.nix reads the same table, so the flake never offers what this module
calls unavailable, and both sides give the same reason.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from workbench.configs.matrix import Flavour, Matrix, Toolkit
from workbench.configs.variants import Variant, by_name, expand, format_name

if TYPE_CHECKING:
    from workbench.patches.series import Series


@dataclass(frozen=True)
class Availability:
    """What the pin says about one target: does it evaluate, and if not why and what instead."""

    name: str
    evaluates: bool
    reason: str | None = None  # why it does not evaluate (one line)
    instead: str | None = None  # a target that does, for the same hardware

    def to_json(self) -> dict[str, object]:
        return {
            "name": self.name,
            "evaluates": self.evaluates,
            "reason": self.reason,
            "instead": self.instead,
        }


def unavailable_reason(variant: Variant, matrix: Matrix) -> str | None:
    """Why the pin cannot build `variant` (its toolkit's package set is gone, or its release
    cannot build its SM), or None."""
    toolkit = variant.toolkit
    if toolkit is None or toolkit.at_pin:
        if variant.sm is None or matrix.releases is None:
            return None
        return matrix.release(variant.ort_version).sm_problem(variant.sm.name)
    versions = ", ".join(
        name.removeprefix("cudaPackages_").replace("_", ".") for name in matrix.pin_cuda_sets
    )
    return (
        f"CUDA {toolkit.version} is not in nixpkgs at the pin {matrix.nixpkgs_rev[:7]}: "
        f"{toolkit.nixpkgs_attr} was removed from nixpkgs (pkgs/top-level/aliases.nix makes it "
        f"a throw since 2025-08-08; the pin has {versions}); nixos-cuda/cuda-legacy's overlay "
        "provides it, but this flake does not take that overlay as an input (README: CUDA 12.4)"
    )


def replacement(variant: Variant, matrix: Matrix) -> Variant | None:
    """The variant with the same SM and ISA on the toolkit named as `instead`, if any; for a
    release that cannot build the SM, the same variant of the pin's release."""
    toolkit = variant.toolkit
    if toolkit is not None and toolkit.at_pin and variant.release_suffix:
        return by_name(matrix).get(variant.base_name)
    if toolkit is None or toolkit.at_pin or toolkit.instead is None:
        return None
    other = matrix.toolkit(toolkit.instead)
    name = format_name(other.python, other, variant.sm, variant.isa)
    return by_name(matrix, variant.ort_version).get(name + variant.release_suffix)


def missing_patches_reason(series: Series | None, target: str) -> str | None:
    """Why the flake cannot evaluate `target` for want of patch files, or None.

    nix/series.nix's `fileOf` throws for an enabled patch of the package whose file is not in
    patches/: the same selection (`Series.applied_to`) and the same file check, for every
    missing file at once where Nix names the first.
    """
    if series is None:
        return None
    missing = [p for p in series.applied_to(target) if not series.file_of(p).is_file()]
    if not missing:
        return None
    files = ", ".join(p.file for p in missing)
    return (
        f"{len(missing)} of its patches in patches/series.toml have no file in "
        f"{series.directory} ({files}): import them with `workbench patches import DIR "
        f"--source ORT_SOURCE` and `git add` them, or disable them"
    )


def of_variant(variant: Variant, matrix: Matrix, series: Series | None = None) -> Availability:
    """The pin's word on one variant (a caveat such as nvcc-too-old is not this: see caveat);
    with `series`, a variant whose patch files are missing does not evaluate either."""
    reason = unavailable_reason(variant, matrix)
    if reason is None:
        patches = missing_patches_reason(series, variant.name)
        return Availability(variant.name, patches is None, patches)
    other = replacement(variant, matrix)
    instead = None
    if other is not None and other.toolkit is not None:
        instead = (
            f"{other.name} (CUDA {other.toolkit.version}, driver ≥ {other.toolkit.min_driver})"
        )
    return Availability(variant.name, False, reason, instead)


def of_flavour(
    flavour: Flavour, matrix: Matrix, series: Series | None = None, ort: str | None = None
) -> Availability:
    """Flavours build with the newest toolkit the pin has, so they evaluate when there is one,
    when their release (`ort`, default the pin's) is offered as that flavour, and (with
    `series`) when every patch file the series gives them is there."""
    if ort and matrix.releases is not None:
        release = matrix.release(ort)
        problem = release.flavour_problem(flavour.name)
        if problem:
            return Availability(flavour.attr + release.suffix, False, problem)
    if flavour.cuda and newest_toolkit_at_pin(matrix) is None:
        return Availability(
            flavour.attr, False, "no toolkit of the matrix is in nixpkgs at the pin"
        )
    patches = missing_patches_reason(series, flavour.name)
    return Availability(flavour.attr, patches is None, patches)


def newest_toolkit_at_pin(matrix: Matrix) -> Toolkit | None:
    """The CUDA toolkit the flavours build with: the newest one the pin still has."""
    present = [toolkit for toolkit in matrix.toolkits if toolkit.at_pin]
    return max(present, key=lambda t: tuple(int(p) for p in t.version.split(".")), default=None)


def unavailable_names(matrix: Matrix) -> list[str]:
    """Every variant of the matrix the pin cannot build, in matrix order."""
    return [v.name for v in expand(matrix) if unavailable_reason(v, matrix) is not None]


def of_target(
    variant: Variant | None, flavour: Flavour | None, matrix: Matrix, series: Series | None = None
) -> Availability:
    """`of_variant` or `of_flavour`, whichever the target is."""
    if variant is not None:
        return of_variant(variant, matrix, series)
    assert flavour is not None
    return of_flavour(flavour, matrix, series)


def build_time_checks_note(variant: Variant | None) -> str | None:
    """What the flake leaves out of a variant's build so its ISA code never runs on the builder."""
    if variant is None or not variant.isa.flags:
        return None
    return (
        f"ORT's unit tests and the Python import check are skipped in this build: its "
        f"{variant.isa.label} code may not run on the machine that builds it "
        f"(`workbench smoke {variant.name}` runs it on a machine that has {variant.isa.label})"
    )


def build_time_checks_notes(variants: Sequence[Variant | None]) -> str | None:
    """`build_time_checks_note` for the targets of one build: one line for all its ISA variants."""
    isa = [v for v in variants if v is not None and v.isa.flags]
    if len(isa) <= 1:
        return build_time_checks_note(isa[0] if isa else None)
    names = ", ".join(v.name for v in isa)
    return (
        f"ORT's unit tests and the Python import check are skipped in the builds of {len(isa)} "
        f"ISA variants ({names}): their ISA code may not run on the machine that builds them "
        f"(`workbench smoke NAME` runs one on a machine that has its ISA)"
    )


def pin_summary(matrix: Matrix, series: Series | None = None) -> dict[str, Any]:
    """Every target's availability at the pin, for `doctor --json` (with `series`, the patch
    files it names are checked too)."""
    targets = [of_variant(v, matrix, series).to_json() for v in expand(matrix)]
    targets += [of_flavour(f, matrix, series).to_json() for f in matrix.flavours]
    return {
        "nixpkgs_rev": matrix.nixpkgs_rev,
        "cuda_package_sets": list(matrix.pin_cuda_sets),
        "toolkits": [offer.to_json() for offer in toolkit_offers(matrix)],
        "evaluates": sum(1 for t in targets if t["evaluates"]),
        "does_not": sum(1 for t in targets if not t["evaluates"]),
        "targets": targets,
    }


@dataclass(frozen=True)
class ToolkitOffer:
    """Whether the flake offers one CUDA toolkit of the matrix, and how."""

    name: str  # "cuda12_9"
    version: str  # "12.9"
    python: str  # the Python its variants use
    offered: bool
    how: str  # where the flake takes it from, or why it does not offer it

    def to_json(self) -> dict[str, object]:
        return {
            "name": self.name,
            "version": self.version,
            "python": self.python,
            "offered": self.offered,
            "how": self.how,
        }

    def line(self) -> str:
        """ "cuda12_9 (CUDA 12.9, Python 3.13): offered, nixpkgs' cudaPackages_12_9 at ..." """
        said = "offered" if self.offered else "not offered"
        return f"{self.name} (CUDA {self.version}, Python {self.python}): {said}, {self.how}"


def toolkit_offers(matrix: Matrix) -> list[ToolkitOffer]:
    """Each toolkit of the matrix: offered from nixpkgs' own package set at the pin, or not
    offered, with the reason the variants of that toolkit give."""
    offers = []
    for toolkit in matrix.toolkits:
        if toolkit.at_pin:
            how = f"nixpkgs' {toolkit.nixpkgs_attr} at the pin {matrix.nixpkgs_rev[:7]}"
        else:
            how = (
                f"{toolkit.nixpkgs_attr} is not in nixpkgs at the pin {matrix.nixpkgs_rev[:7]} "
                "(an aliases.nix throw since 2025-08-08) and the flake takes no overlay for it "
                "(nixos-cuda/cuda-legacy provides it; README: CUDA 12.4)"
            )
        offers.append(
            ToolkitOffer(toolkit.name, toolkit.version, toolkit.python, toolkit.at_pin, how)
        )
    return offers

"""Which counts a Nix build's ETA takes from its builder's ninja (`live_eta.builder_counts`),
and how its basis names what follows that ninja. The whole path, through real Nix with the
stand-in flake, is tests/supervision/test_supervision_nix.py."""

from __future__ import annotations

from pathlib import Path

from workbench.progress import Progress
from workbench.progress.steps import Step
from workbench.progress.tracker import DerivationState
from workbench.supervision.live_eta import BuilderNinja, LiveEta, builder_counts

NAME = "onnxruntime-python312-cuda12_4-sm90-avx2-cpp"


def progress(planned: int, done: int, building: list[tuple[str, Step | None]]) -> Progress:
    """A Nix build's progress with `building` (name, its latest step) building now."""
    derivations = tuple(
        DerivationState(f"/nix/store/{'x' * 32}-{name}.drv", name, "buildPhase", step, 0.0)
        for name, step in building
    )
    return Progress(
        planned, len(derivations), done, 0, derivations, (), None, (), 0, 0, 0, "", True
    )


def builder() -> BuilderNinja:
    return BuilderNinja(Path("/build/source/build/.ninja_log"), NAME, 12.0, LiveEta(None, 1))


def test_the_one_derivation_building_gives_its_ninja_counts_and_what_follows() -> None:
    ninja = Step("ninja", 40, 1200, "Building CXX object x.cc.o")
    found = builder()
    assert builder_counts(progress(1, 0, [(NAME, ninja)]), found) == (40, 1200)
    assert found.after_words() == "its install and fixup"
    # A variant's Python package after its C++ one (nix/overrides.nix `variant`).
    assert builder_counts(progress(2, 0, [(NAME, ninja)]), found) == (40, 1200)
    assert found.after_words() == "its install and fixup and the 1 derivation after it"
    # Dependencies built before it in the same build are done, not after it.
    assert builder_counts(progress(5, 2, [(NAME, ninja)]), found) == (40, 1200)
    assert found.after_words() == "its install and fixup and the 2 derivations after it"


def test_no_counts_where_the_ninja_is_not_the_build_s_one_step() -> None:
    ninja = Step("ninja", 40, 1200, "Building CXX object x.cc.o")
    other = "abseil-cpp-20240722.0"
    assert builder_counts(progress(3, 0, [(NAME, ninja), (other, ninja)]), builder()) is None
    assert builder_counts(progress(2, 0, [(other, ninja)]), builder()) is None
    assert builder_counts(progress(1, 0, [(NAME, Step("make", 40, 100, ""))]), builder()) is None
    assert builder_counts(progress(1, 0, [(NAME, None)]), builder()) is None
    assert builder_counts(progress(1, 0, [(NAME, ninja)]), None) is None
    assert builder_counts(progress(0, 0, []), builder()) is None

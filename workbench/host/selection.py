"""The selection guide done for the user: detected hardware -> the variant to build, and why."""

from __future__ import annotations

import re
from dataclasses import dataclass

from workbench.configs.matrix import Matrix, Sm, Toolkit
from workbench.configs.variants import Variant, by_name, format_name
from workbench.host.hardware import Hardware


@dataclass(frozen=True)
class ToolkitSupport:
    """Whether the installed driver can run a CUDA toolkit."""

    version: str
    min_driver: str
    usable: bool


@dataclass(frozen=True)
class Recommendation:
    """A variant chosen for this host and the reasons, one line each."""

    variant: Variant
    reasons: tuple[str, ...]


@dataclass(frozen=True)
class MixedGpus:
    """Guidance for a host with GPUs of different architectures.

    No variant name covers two SMs, so the one build for all of them is `variant` with the
    `cuda_architectures` setting naming every architecture (settings.toml's list replaces a
    variant's own SM: nix/overrides.nix mkOrt); `per_gpu` is the variant each GPU would get if
    they want one build each. `configured` is settings.toml's cuda_architectures as it is now.
    """

    architectures: tuple[str, ...]  # CMAKE_CUDA_ARCHITECTURES form: ("80", "89")
    variant: Variant
    command: str
    per_gpu: tuple[tuple[str, str], ...]  # (GPU name, variant name)
    gpu_sms: tuple[tuple[str, str], ...] = ()  # (GPU name, SM name), each pair once
    configured: tuple[str, ...] = ()

    @property
    def sm_names(self) -> tuple[str, ...]:
        """The SMs needed, oldest first: ("sm80", "sm89")."""
        return tuple(dict.fromkeys(sm for _, sm in self.gpu_sms))

    @property
    def already_set(self) -> bool:
        """Whether settings.toml's cuda_architectures names every architecture already."""
        return set(self.architectures) <= set(self.configured)

    def headline(self) -> str:
        """The first thing to say: why there is no one name to build."""
        gpus = ", ".join(f"{gpu} {sm}" for gpu, sm in self.gpu_sms) or ",".join(self.architectures)
        return (
            f"These GPUs need {len(self.architectures)} architectures ({gpus}) and no single "
            "variant name covers them all"
        )

    def one_build_intro(self) -> str:
        """What the one build for all of them is, before its commands."""
        return (
            f"One build for all of them (CMAKE_CUDA_ARCHITECTURES={';'.join(self.architectures)}:"
            " one binary with each architecture's code, a longer compile)"
        )

    def one_build_commands(self) -> tuple[str, ...]:
        """The commands of the one build for all, in order (the setting first unless set)."""
        build = f"workbench build {self.variant.name}"
        return (build,) if self.already_set else (self.command, build)

    def setting_note(self) -> str | None:
        """What settings.toml's cuda_architectures says now, where it matters."""
        if not self.configured:
            return None
        now = ",".join(self.configured)
        if self.already_set:
            return f"settings.toml's cuda_architectures is {now} already: it names them all"
        return (
            f"settings.toml's cuda_architectures is {now} now, which every variant builds "
            "instead of its own SM"
        )

    def per_gpu_line(self) -> str:
        """The per-GPU alternative: which variant each GPU gets."""
        line = "Or one variant per GPU: " + "; ".join(
            f"{gpu}: {variant}" for gpu, variant in self.per_gpu
        )
        if self.configured:
            line += (
                " (each builds settings.toml's cuda_architectures instead of its own SM until "
                '`workbench config set cuda_architectures ""` empties it)'
            )
        return line

    def one_build_line(self) -> str:
        """The one build for all of them as one sentence, commands included."""
        commands = ", then ".join(f"`{command}`" for command in self.one_build_commands())
        note = self.setting_note()
        return f"{self.one_build_intro()}: {commands}" + (f" ({note})" if note else "")

    def lines(self) -> tuple[str, ...]:
        """What to tell the user, one line each, in the order to say it."""
        return (self.headline(), self.one_build_line(), self.per_gpu_line())


@dataclass(frozen=True)
class Selection:
    """The guide's answer: recommended variants (first is the main one) and alternatives.

    mixed is set when the GPUs need different architectures: the single recommendation that
    covers them all.
    """

    recommended: tuple[Recommendation, ...]
    alternatives: tuple[Recommendation, ...]
    toolkits: tuple[ToolkitSupport, ...]
    notes: tuple[str, ...]
    mixed: MixedGpus | None = None

    @property
    def primary(self) -> Recommendation | None:
        return self.recommended[0] if self.recommended else None


def version_key(version: str) -> tuple[int, ...]:
    """ "575.51.03" -> (575, 51, 3), for comparing driver and toolkit versions."""
    return tuple(int(part) for part in re.findall(r"\d+", version))


def toolkit_support(driver: str | None, matrix: Matrix) -> tuple[ToolkitSupport, ...]:
    """Every CUDA toolkit with a known driver floor, and whether `driver` meets it."""
    return tuple(
        ToolkitSupport(
            version,
            floor,
            driver is not None and version_key(driver) >= version_key(floor),
        )
        for version, floor in sorted(matrix.driver_floors.items(), key=lambda i: version_key(i[0]))
    )


def sm_for_capability(capability: str, matrix: Matrix) -> tuple[Sm | None, str]:
    """The matrix SM whose code runs on `capability`, with how it was chosen.

    CUDA binaries run on the same major version with an equal or higher minor ("8.6" code runs
    on an 8.7 or 8.9 GPU), so an exact match is best, else the highest lower minor.
    """
    major, _, minor = capability.partition(".")
    for sm in matrix.sms:
        if sm.capability == capability:
            return sm, f"compute capability {capability} is {sm.name} ({sm.family})"
    compatible = [
        sm
        for sm in matrix.sms
        if sm.capability.partition(".")[0] == major
        and int(sm.capability.partition(".")[2]) <= int(minor or 0)
    ]
    if compatible:
        sm = max(compatible, key=lambda s: int(s.capability.partition(".")[2]))
        return sm, (
            f"compute capability {capability} has no variant of its own; {sm.name} "
            f"({sm.capability}) code runs on it (same major version)"
        )
    return (
        None,
        f"compute capability {capability} has no variant (SMs: "
        f"{', '.join(sm.name for sm in matrix.sms)})",
    )


def _main_isa(isas: tuple[str, ...], matrix: Matrix) -> str | None:
    """The ISA to recommend: AVX-512 on x86 when present (the guide's "most servers" choice),
    else the most capable ISA this CPU runs."""
    if not isas:
        return None
    if "avx512" in isas:
        return "avx512"
    return max(isas, key=lambda name: matrix.isa(name).rank)


def _newest_toolkit(sm: Sm, driver: str | None, matrix: Matrix) -> tuple[Toolkit | None, str]:
    """The newest matrix toolkit that the driver runs and whose nvcc targets the SM."""
    targets = [t for t in matrix.toolkits if version_key(t.version) >= version_key(sm.min_toolkit)]
    if not targets:
        return None, f"no toolkit in the matrix can target {sm.name}"
    # A toolkit the nixpkgs pin no longer has (CUDA 12.4) is never recommended: it cannot be built.
    buildable = [t for t in targets if t.at_pin]
    if not buildable:
        return None, f"no toolkit in the matrix that the nixpkgs pin has can target {sm.name}"
    if driver is None:
        newest = max(buildable, key=lambda t: version_key(t.version))
        return newest, f"driver version unknown; assuming it runs CUDA {newest.version}"
    runnable = [t for t in targets if version_key(driver) >= version_key(t.min_driver)]
    if runnable and not any(t.at_pin for t in runnable):
        gone = ", ".join(f"CUDA {t.version}" for t in runnable)
        floor = min(buildable, key=lambda t: version_key(t.min_driver))
        return None, (
            f"driver {driver} runs only {gone}, which the nixpkgs pin no longer has; "
            f"update the driver to {floor.min_driver}+ to build CUDA {floor.version} variants"
        )
    runnable = [t for t in runnable if t.at_pin]
    targets = buildable
    if not runnable:
        oldest = min(targets, key=lambda t: version_key(t.min_driver))
        return None, (
            f"driver {driver} is older than {oldest.min_driver}, the floor of CUDA "
            f"{oldest.version}: update the driver to use the GPU"
        )
    best = max(runnable, key=lambda t: version_key(t.version))
    skipped = [t for t in targets if t not in runnable]
    reason = f"driver {driver} runs CUDA {best.version} (needs {best.min_driver}+)"
    if skipped:
        newer = max(skipped, key=lambda t: version_key(t.version))
        reason += f"; CUDA {newer.version} would need {newer.min_driver}+"
    return best, reason


def select(hardware: Hardware, matrix: Matrix) -> Selection:
    """Recommend variants for the detected hardware, with a reason for each choice."""
    variants = by_name(matrix)
    driver = hardware.gpu.driver_version
    toolkits = toolkit_support(driver, matrix) if hardware.gpu.found else ()
    notes: list[str] = list(hardware.gpu.warnings)
    isa_name = _main_isa(hardware.cpu.isas, matrix)
    if isa_name is None:
        notes.append(
            f"this CPU ({hardware.cpu.machine}, {hardware.cpu.model}) runs none of the matrix's "
            "ISAs: x86-64 variants need at least AVX2 and FMA"
        )
        return Selection((), (), toolkits, tuple(notes))
    isa = matrix.isa(isa_name)
    isa_reason = f"CPU {hardware.cpu.model} supports {isa.label} ({isa.use})"
    recommended: list[Recommendation] = []
    gpu_reasons: list[str] = []
    seen_sms: set[str] = set()
    per_gpu: list[tuple[str, Variant]] = []
    for gpu in hardware.gpu.gpus:
        if gpu.compute_capability is None:
            gpu_reasons.append(f"{gpu.name}: compute capability unknown, no GPU variant chosen")
            continue
        sm, sm_reason = sm_for_capability(gpu.compute_capability, matrix)
        if sm is None:
            gpu_reasons.append(f"{gpu.name}: {sm_reason}")
            continue
        if sm.name in seen_sms:
            per_gpu += [(gpu.name, r.variant) for r in recommended if r.variant.sm == sm][:1]
            continue
        seen_sms.add(sm.name)
        toolkit, toolkit_reason = _newest_toolkit(sm, driver, matrix)
        if toolkit is None:
            gpu_reasons.append(f"{gpu.name}: {toolkit_reason}")
            continue
        name = format_name(toolkit.python, toolkit, sm, isa)
        if name not in variants:
            gpu_reasons.append(
                f"{gpu.name}: {sm.name} is built for {', '.join(sm.isas)} only, "
                f"not for this CPU's {isa.label}"
            )
            continue
        per_gpu.append((gpu.name, variants[name]))
        recommended.append(
            Recommendation(
                variants[name],
                (
                    f"GPU {gpu.name}: {sm_reason}",
                    toolkit_reason,
                    isa_reason,
                    f"Python {toolkit.python} goes with CUDA {toolkit.version}",
                ),
            )
        )
    cpu_only = format_name(matrix.cpu_python, None, None, isa)
    if not recommended:
        why_no_gpu = gpu_reasons or [hardware.gpu.message]
        if cpu_only in variants:
            recommended.append(Recommendation(variants[cpu_only], (*why_no_gpu, isa_reason)))
        else:
            notes.extend(why_no_gpu)
    else:
        notes.extend(gpu_reasons)
    alternatives = []
    main = recommended[0].variant if recommended else None
    for other in hardware.cpu.isas:
        if main is None or other == main.isa.name:
            continue
        other_isa = matrix.isa(other)
        name = format_name(main.python, main.toolkit, main.sm, other_isa)
        if name in variants:
            alternatives.append(
                Recommendation(variants[name], (f"also runs here; for {other_isa.use}",))
            )
    return Selection(
        tuple(recommended),
        tuple(alternatives),
        toolkits,
        tuple(notes),
        _mixed(recommended, per_gpu),
    )


def _mixed(
    recommended: list[Recommendation], per_gpu: list[tuple[str, Variant]]
) -> MixedGpus | None:
    """One build covering every GPU's architecture, when the GPUs differ."""
    gpu_variants = [r.variant for r in recommended if r.variant.sm is not None]
    sms = {variant.sm.name: variant.sm for variant in gpu_variants if variant.sm}
    if len(sms) < 2:
        return None
    # The newest toolkit among them targets every one of the older architectures too.
    base = max(gpu_variants, key=lambda v: version_key(v.toolkit.version if v.toolkit else "0"))
    oldest_first = sorted(sms.values(), key=lambda s: version_key(s.capability))
    arches = tuple(sm.cmake_arch for sm in oldest_first)
    order = [sm.name for sm in oldest_first]
    gpu_sms = sorted(
        {(gpu, variant.sm.name) for gpu, variant in per_gpu if variant.sm is not None},
        key=lambda pair: (order.index(pair[1]), pair[0]),
    )
    return MixedGpus(
        architectures=arches,
        variant=base,
        command=f"workbench config set cuda_architectures {','.join(arches)}",
        per_gpu=tuple((gpu, variant.name) for gpu, variant in per_gpu),
        gpu_sms=tuple(gpu_sms),
    )

"""`workbench doctor`: what this host has and which variant it should build."""

from __future__ import annotations

import argparse
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from rich.console import Console

    from workbench.configs.matrix import Flavour
    from workbench.host.selection import MixedGpus


def register(subcommands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    parser = subcommands.add_parser(
        "doctor",
        help="check tools, GPUs, CPU, memory and ptrace; recommend a variant",
        description="Check the tools the workbench drives, detect GPUs and the CPU's ISA, and "
        "recommend the variant and parallelism for this host.",
    )
    parser.add_argument("--json", action="store_true", help="machine-readable output")
    parser.add_argument(
        "--nvidia-smi",
        default="nvidia-smi",
        metavar="PATH",
        help="the nvidia-smi to ask (default: nvidia-smi on PATH)",
    )
    parser.set_defaults(handler=run)


def run(args: argparse.Namespace) -> int:
    from workbench.cli.common import load_config, print_json
    from workbench.configs.settings import load_settings
    from workbench.host.units import byte_size
    from workbench.reading.doctor import diagnose, report_to_json

    directory, matrix = load_config(args)
    from workbench.configs.paths import state_dir

    report = diagnose(
        matrix, load_settings(directory, matrix), args.nvidia_smi, state_dir(args.state_dir)
    )
    document = report_to_json(report)
    from workbench.errors import ConfigError
    from workbench.patches.series import load_series
    from workbench.planning.availability import pin_summary

    try:
        series = load_series(directory, matrix)
    except ConfigError:
        series = None  # `workbench patches check` says what is wrong with it
    pin = pin_summary(matrix, series)
    document["nixpkgs_pin"] = pin
    from workbench.host.linking import recommend_flavour

    linking = recommend_flavour(matrix, bool(report.hardware.gpu.gpus))
    document["linking"] = linking.to_json()
    from workbench.host.nix_daemon import check_daemon, reality_lines

    daemon = report.nix_store or check_daemon()
    document["nix_store"] = daemon.to_json()
    if document["mixed_gpus"] is not None and linking.flavour.cuda:
        # The text says it too: the linking flavour builds the same cuda_architectures.
        document["mixed_gpus"]["flavour"] = linking.flavour.name
    if args.json:
        print_json(document)
        return 0
    import sys

    from rich.console import Console
    from rich.markup import escape

    # Piped (not a terminal), Rich would wrap at 80 columns, mid-sentence: lines stay whole.
    console = Console(highlight=False, soft_wrap=not sys.stdout.isatty())

    def heading(text: str) -> None:
        console.print(f"\n[bold]{text}[/bold]")

    heading("Tools")
    for tool in report.tools:
        if tool.found:
            extra = f" ({tool.note})" if tool.note else ""
            console.print(f"  [green]ok[/]      {tool.name:6} {tool.version or '?'}{extra}")
        else:
            console.print(f"  [yellow]missing[/] {tool.name:6}")
    heading("GPUs")
    gpu = report.hardware.gpu
    console.print(f"  {escape(gpu.message)}")
    for device in document["gpus"]["devices"]:
        console.print(
            f"  #{device['index']} {escape(device['name'])}: compute capability "
            f"{device['compute_capability'] or '?'} ({device['sm'] or 'unknown SM'}, from "
            f"{device['capability_source']}), driver {gpu.driver_version or '?'}"
        )
    for warning in gpu.warnings:
        # nvidia-smi's own text (garbage included) is data, never Rich markup.
        console.print(f"  [yellow]warning[/]: {escape(warning)}")
    if report.selection.toolkits:
        usable = [t.version for t in report.selection.toolkits if t.usable]
        console.print(f"  CUDA toolkits this driver runs: {', '.join(usable) or 'none'}")
        for t in report.selection.toolkits:
            mark = "[green]yes[/]" if t.usable else "[red]no[/] "
            console.print(f"    {mark} CUDA {t.version:5} needs driver {t.min_driver}+")
    heading("CPU and memory")
    cpu, memory = report.hardware.cpu, report.hardware.memory
    console.print(f"  {cpu.model} ({cpu.machine}), {cpu.cores} usable cores")
    console.print(f"  ISAs: {', '.join(cpu.isas) or 'none of the matrix'}")
    limit = f", cgroup limit {byte_size(memory.cgroup_limit)}" if memory.cgroup_limit else ""
    console.print(
        f"  memory: {byte_size(memory.available)} available of {byte_size(memory.total)}{limit}"
    )
    heading("Debugging")
    mark = "[green]ok[/]" if report.ptrace.allowed else "[red]no[/]"
    console.print(f"  {mark} {report.ptrace.reason}")
    heading("Recommended variant")
    mixed = report.selection.mixed
    if not report.selection.recommended:
        console.print("  [red]none[/]")
    if mixed is not None:
        print_mixed_gpus(console, mixed, linking.flavour if linking.flavour.cuda else None)
    for item in report.selection.recommended:
        # On a mixed host each variant is one GPU's: say whose (GPU names are nvidia-smi's text).
        gpus = (
            sorted({gpu for gpu, name in mixed.per_gpu if name == item.variant.name})
            if mixed
            else []
        )
        whose = f"{escape(', '.join(gpus))}: " if gpus else ""
        console.print(f"  {whose}[bold cyan]{item.variant.name}[/]")
        for reason in item.reasons:
            console.print(f"    - {escape(reason)}")
    for item in report.selection.alternatives:
        console.print(f"  also: {item.variant.name}: {item.reasons[0]}")
    for note in report.selection.notes:
        console.print(f"  note: {escape(note)}")
    heading("Linking ORT into a Rust or C++ program")
    console.print(f"  [bold cyan]{linking.flavour.name}[/] (.#{linking.flavour.attr})")
    for reason in linking.reasons:
        console.print(f"    - {escape(reason)}")
    for flavour, why in linking.experimental:
        console.print(f"  {flavour.name} is experimental: {escape(why)}")
    heading(f"At the nixpkgs pin ({matrix.nixpkgs_rev[:7]})")
    targets = pin["targets"]
    console.print(
        f"  {pin['evaluates']} of {len(targets)} variants and flavours evaluate "
        f"(CUDA package sets there: {', '.join(matrix.pin_cuda_sets)})"
    )
    from workbench.planning.availability import toolkit_offers

    for offer in toolkit_offers(matrix):
        mark = "[green]✓[/]" if offer.offered else "[red]✗[/]"
        console.print(f"  {mark} toolkit {escape(offer.line())}", soft_wrap=True)
    reasons: dict[str, list[dict[str, Any]]] = {}
    for target in targets:
        if not target["evaluates"]:
            reasons.setdefault(target["reason"], []).append(target)
    for reason, gone in reasons.items():
        console.print(f"  [red]✗[/] {len(gone)} do not: {escape(reason)}")
        for target in gone:
            instead = f" → build {target['instead']} instead" if target["instead"] else ""
            # One line each, whatever the width: a name cut in two cannot be copied.
            console.print(f"      {target['name']}{instead}", soft_wrap=True)
    console.print("  `workbench build NAME --dry-run` asks Nix itself for one target")
    heading("Nix store and daemon")
    for line in reality_lines(daemon):
        # Nix's and nix.conf's words are data, never Rich markup.
        console.print(f"  {escape(line)}", soft_wrap=True)
    heading("Parallelism")
    advice = report.parallelism
    console.print(f"  ninja jobs {advice.jobs}, nvcc threads {advice.nvcc_threads}")
    for reason in advice.reasons:
        console.print(f"    - {reason}")
    return 0


def print_mixed_gpus(console: Console, mixed: MixedGpus, cuda_flavour: Flavour | None) -> None:
    """A host whose GPUs need different architectures, first: no one variant name covers them,
    the one build for all of them (the setting, then the variant), then one variant per GPU."""
    from rich.markup import escape

    console.print(f"  [bold]{escape(mixed.headline())}.[/]")
    console.print(f"  {escape(mixed.one_build_intro())}:")
    for command in mixed.one_build_commands():
        # Whole, whatever the width: a command cut in two cannot be pasted.
        console.print(f"      {escape(command)}", soft_wrap=True)
    note = mixed.setting_note()
    if note:
        console.print(f"    - {escape(note)}")
    if cuda_flavour is not None:
        console.print(
            f"    - for linking, {cuda_flavour.name} (below) builds the same cuda_architectures"
        )
    console.print("  Or one variant per GPU:")

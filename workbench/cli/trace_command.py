"""`workbench trace ID [-o FILE]`: a build's exact edges as a Chrome trace (Perfetto JSON)."""

from __future__ import annotations

import argparse
import sys


def register(subcommands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Add `trace` to the parser."""
    trace = subcommands.add_parser(
        "trace",
        help="write a build's edges as a Chrome trace (open it in ui.perfetto.dev)",
        description="Write a finished build's exact edges (from its .ninja_log) as a Chrome "
        "trace / Perfetto JSON file: one row per job slot, each edge named by its output, with "
        "the build's sampled memory and CPU as counters. Open it in https://ui.perfetto.dev or "
        "chrome://tracing.",
    )
    trace.add_argument("id", type=int, help="the build (`workbench history` lists them)")
    trace.add_argument(
        "-o",
        "--output",
        metavar="FILE",
        help="where to write it (default: build-ID.trace.json here; - for standard output)",
    )
    trace.set_defaults(handler=run_trace)


def run_trace(args: argparse.Namespace) -> int:
    """`workbench trace ID`."""
    import json
    from pathlib import Path

    from workbench.analysis.summary import analyse
    from workbench.analysis.trace import SamplePoint, chrome_trace, write_trace
    from workbench.configs.paths import state_dir
    from workbench.errors import WorkbenchError
    from workbench.history.records import cpu_measured
    from workbench.history.store import History

    history = History(state_dir(args.state_dir).resolve())
    record = history.get(args.id)
    if record.active:
        raise WorkbenchError(
            f"build #{record.id} is still {record.state}; its edges are stored when it ends"
        )
    analysis = analyse(history.edges(record.id), record.jobs)
    if analysis is None:
        raise WorkbenchError(
            f"build #{record.id} has no edges: no .ninja_log was found for it (only builds "
            "that run ninja have them; `workbench report "
            f"{record.id}` shows what was sampled)"
        )
    started = record.started or analysis.origin
    stored = history.samples(record.id)
    samples = [
        SamplePoint(sample.t - started, sample.rss, sample.cpu_cores if known else None)
        for sample, known in zip(stored, cpu_measured(stored), strict=True)
    ]
    release = (record.settings or {}).get("ort_version")
    document = chrome_trace(
        f"build #{record.id} {record.name}" + (f" (ONNX Runtime {release})" if release else ""),
        analysis.edges,
        offset_s=max(0.0, analysis.origin - started),
        samples=samples,
        peak_rss=analysis.peak_rss,
    )
    if args.output == "-":
        json.dump(document, sys.stdout, sort_keys=True)  # as every JSON the CLI prints
        sys.stdout.write("\n")
        return 0
    target = Path(args.output or f"build-{record.id}.trace.json")
    write_trace(target, document)
    print(
        f"workbench: wrote {target} ({len(analysis.edges)} edges); open it in "
        "https://ui.perfetto.dev or chrome://tracing",
        file=sys.stderr,
    )
    return 0

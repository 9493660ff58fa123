"""`workbench history [--json]`: finished builds with their measurements."""

from __future__ import annotations

import argparse

from workbench.cli.build_common import history as _history
from workbench.cli.build_common import positive as _positive


def register(subcommands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Add `workbench history` to the parser."""
    history = subcommands.add_parser("history", help="finished builds with their measurements")
    history.add_argument("--json", action="store_true", help="machine-readable output")
    history.add_argument("--limit", type=_positive, default=20, help="builds shown (default 20)")
    history.set_defaults(handler=run_history)


def run_history(args: argparse.Namespace) -> int:
    """`workbench history [--json]`."""
    from workbench.cli.common import print_json
    from workbench.progress.visible import visible
    from workbench.reading.follow import duration, loss_text, size
    from workbench.supervision import liveness
    from workbench.supervision.ending import adoption_text

    history = _history(args)
    records = liveness.check(history, history.builds(limit=args.limit))
    if args.json:
        documents = []
        for record in records:
            measured = history.measured(record.id)
            documents.append(
                {
                    **record.to_json(),
                    "measurements": measured.to_json() if measured else None,
                    "artefacts": history.artefacts(record.id),
                }
            )
        print_json({"builds": documents, "history": str(history.path)})
        return 0
    if not records:
        print(f"no builds yet in {history.path}")
        return 0
    from workbench.artefacts.sizes import from_json, human_bytes

    print(
        f"{'id':>4}  {'state':9}  {'name':32}  {'ORT':7}  {'jobs':>4}  {'time':>8}  {'CPU':>5}  "
        f"{'peak RSS':>9}  {'most':>4}  {'closure':>9}  note"
    )
    for record in records:
        measured = history.measured(record.id, slowest=0)
        cpu = f"{measured.cpu_utilisation:.0f}%" if measured else "-"
        # 0: no sample met the build (a no-op rebuild ends between two samples), as the
        # History screen and the report say: not a peak of 0 MiB.
        peak = size(measured.peak_rss) if measured and measured.peak_rss else "-"
        most = str(measured.most_jobs) if measured else "-"
        name, note = visible(record.name), visible(record.note or "")
        produced = from_json(history.artefacts(record.id))
        closure = human_bytes(produced.closure_size) if produced else "-"
        ort = visible(str((record.settings or {}).get("ort_version") or "-"))
        print(
            f"{record.id:>4}  {record.state:9}  {name[:32]:32}  {ort[:7]:7}  "
            f"{record.jobs if record.jobs else '-':>4}  {duration(record.elapsed()):>8}  "
            f"{cpu:>5}  {peak:>9}  {most:>4}  {closure:>9}  {note[:70]}"
        )
        for said in (loss_text(record), adoption_text(record)):
            if said:
                print(f"{'':>4}  {visible(said)}")
    return 0

"""Shell completion for bash, zsh and fish, through argcomplete.

`workbench completion SHELL` prints the script to source (it asks `workbench` itself for the
candidates, with $_ARGCOMPLETE set, so completion follows the installed version): commands,
actions and options from the real parser, and the names that pay most to complete — variant
and flavour names (`onnxruntime-python313-cuda12_9-sm90-avx512`), build ids from the history,
setting keys, patch names and ONNX Runtime releases — read from the configs and state the
command itself would use (--config, --state-dir, the environment, the current checkout).
"""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from workbench.configs.matrix import Matrix

SHELLS = ("bash", "zsh", "fish")


def register(subcommands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    parser = subcommands.add_parser(
        "completion",
        help="print the shell completion script for bash, zsh or fish",
        description="Print the completion script for SHELL. bash: add "
        '`eval "$(workbench completion bash)"` to ~/.bashrc; zsh: the same in ~/.zshrc; fish: '
        "`workbench completion fish > ~/.config/fish/completions/workbench.fish`. Variant, "
        "flavour and build-id names complete too.",
    )
    parser.add_argument("shell", choices=SHELLS)
    parser.set_defaults(handler=run)


def run(args: argparse.Namespace) -> int:
    import argcomplete

    print(argcomplete.shellcode(["workbench"], shell=args.shell), end="")
    return 0


def _config(parsed: argparse.Namespace) -> tuple[Path, Matrix]:
    from workbench.configs.matrix import load_matrix
    from workbench.configs.paths import config_dir

    directory = config_dir(getattr(parsed, "config", None))
    return directory, load_matrix(directory)


def _targets(prefix: str, parsed_args: argparse.Namespace, **_other: object) -> list[str]:
    from workbench.configs.variants import expand

    _, matrix = _config(parsed_args)
    names = [v.name for v in expand(matrix)] + [f.name for f in matrix.flavours]
    names += [f.attr for f in matrix.flavours]
    return sorted({name for name in names if name.startswith(prefix)})


def _flavours(prefix: str, parsed_args: argparse.Namespace, **_other: object) -> list[str]:
    _, matrix = _config(parsed_args)
    return [f.name for f in matrix.flavours if f.name.startswith(prefix)]


def _releases(prefix: str, parsed_args: argparse.Namespace, **_other: object) -> list[str]:
    _, matrix = _config(parsed_args)
    versions = matrix.releases.versions if matrix.releases else (matrix.ort_version,)
    return [v for v in versions if v.startswith(prefix)]


def _setting_keys(prefix: str, **_other: object) -> list[str]:
    from workbench.configs.settings import SPECS
    from workbench.configs.user_settings import OWN_KEYS

    return [key for key in (*SPECS, *OWN_KEYS) if key.startswith(prefix)]


def _patches(prefix: str, parsed_args: argparse.Namespace, **_other: object) -> list[str]:
    from workbench.patches.series import load_series

    directory, matrix = _config(parsed_args)
    return [p.name for p in load_series(directory, matrix).patches if p.name.startswith(prefix)]


def _build_ids(prefix: str, parsed_args: argparse.Namespace, **_other: object) -> list[str]:
    from workbench.configs.paths import state_dir
    from workbench.history.store import History, database_path

    state = state_dir(getattr(parsed_args, "state_dir", None))
    if not database_path(state).exists():
        return []
    with History(state) as history:
        ids = [str(record.id) for record in history.builds(limit=200)]
    return [i for i in ids if i.startswith(prefix)]


# (command path, argument dest or option) -> completer
COMPLETERS = {
    ("build", "variant"): _targets,
    ("smoke", "target"): _targets,
    ("iterate", "variant"): _targets,
    ("patches list", "--for"): _targets,
    ("patches check", "--for"): _targets,
    ("env", "flavour"): _flavours,
    ("layout", "flavour"): _flavours,
    ("patches new", "--flavour"): _flavours,
    ("patches import", "--flavour"): _flavours,
    ("variants", "--ort"): _releases,
    ("build", "--ort"): _releases,
    ("smoke", "--ort"): _releases,
    ("patches check", "--ort"): _releases,
    ("config get", "key"): _setting_keys,
    ("config set", "key"): _setting_keys,
    ("patches show", "name"): _patches,
    ("patches enable", "name"): _patches,
    ("patches disable", "name"): _patches,
    ("attach", "id"): _build_ids,
    ("logs", "id"): _build_ids,
    ("stop", "id"): _build_ids,
    ("report", "id"): _build_ids,
    ("report", "id2"): _build_ids,
    ("trace", "id"): _build_ids,
    ("push", "build"): _build_ids,
}


def attach_completers(parser: argparse.ArgumentParser) -> None:
    """Set each argument's completer (COMPLETERS) on the real parser."""

    def walk(current: argparse.ArgumentParser, path: tuple[str, ...]) -> None:
        for action in current._actions:
            if isinstance(action, argparse._SubParsersAction):
                for name, sub in action.choices.items():
                    walk(sub, (*path, name))
                continue
            names = action.option_strings or [action.dest]
            for name in names:
                completer = COMPLETERS.get((" ".join(path), name))
                if completer is not None:
                    action.completer = completer  # type: ignore[attr-defined]
            if action.dest in ("config", "state_dir", "directory") or action.metavar == "DIR":
                import argcomplete

                action.completer = argcomplete.completers.DirectoriesCompleter()  # type: ignore[attr-defined]

    walk(parser, ())


def complete() -> None:
    """Answer the shell's completion request ($_ARGCOMPLETE set) and exit."""
    import argcomplete

    from workbench.cli.main import build_parser

    parser = build_parser()
    attach_completers(parser)
    argcomplete.autocomplete(parser)

"""`workbench config show|get|set`: read and edit configs/settings.toml."""

from __future__ import annotations

import argparse


def register(subcommands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    parser = subcommands.add_parser(
        "config",
        help="show or edit settings (the checkout's configs/settings.toml, and yours)",
        description="Show or edit the settings. What changes a derivation (CUDA "
        "architectures, nvcc threads, optimisation flags...) is written to the checkout's "
        "tracked configs/settings.toml; what is yours on this host (ninja_jobs, max_jobs, the "
        "per-job memory estimates, checkout, theme) to your config directory's settings.toml, "
        "so it never dirties the repository. Edits keep the file's comments and layout and are "
        "written atomically; a refused value leaves the file untouched.",
    )
    actions = parser.add_subparsers(dest="config_action", metavar="ACTION", required=True)
    show = actions.add_parser("show", help="every setting with its value and meaning")
    show.add_argument("--json", action="store_true", help="machine-readable output")
    get = actions.add_parser("get", help="print one setting's value")
    get.add_argument("key")
    set_ = actions.add_parser("set", help="change one setting, e.g. `config set ninja_jobs 8`")
    set_.add_argument("key")
    # The rest of the line, as given: a value may start with "-" (`optimization_flags -O3`),
    # which argparse would otherwise take for an option and answer "arguments are required".
    set_.add_argument(
        "value",
        nargs=argparse.REMAINDER,
        metavar="VALUE",
        help='the new value; lists comma-separated ("90,120"), flags as they are '
        '("-O3 -march=native")',
    )
    parser.set_defaults(handler=run)


def run(args: argparse.Namespace) -> int:
    from workbench.cli.common import load_config, print_json
    from workbench.configs.settings import (
        SPECS,
        format_value,
        get_setting,
        load_settings,
        per_user,
        set_setting,
        settings_path,
        written_to,
    )
    from workbench.configs.user_settings import (
        OWN_KEYS,
        check_own,
        get_own,
        user_settings_path,
        write_user_settings,
    )

    if args.config_action == "set":
        args.value = _value_words(args)
    if args.config_action in ("set", "get") and args.key in OWN_KEYS:
        if args.config_action == "get":
            print(get_own(args.key) or "")
            return 0
        path = write_user_settings({args.key: check_own(args.key, args.value)})
        print(f"{args.key} = {get_own(args.key)}  (written to {path}: yours, on this host)")
        return 0
    directory, matrix = load_config(args)
    if args.config_action == "set":
        settings = set_setting(directory, matrix, args.key, args.value)
        where = written_to(directory, args.key)
        kind = (
            "yours, on this host; never changes what Nix builds"
            if per_user(args.key)
            else "tracked by the checkout; changes what Nix builds"
        )
        print(
            f"{args.key} = {format_value(get_setting(settings, args.key))}  "
            f"(written to {where}: {kind})"
        )
        return 0
    settings = load_settings(directory, matrix)
    if args.config_action == "get":
        print(format_value(get_setting(settings, args.key)))
        return 0
    if args.json:
        values = {}
        for key in SPECS:
            value = getattr(settings, key)
            values[key] = list(value) if isinstance(value, tuple) else value
        print_json(
            {
                "file": str(settings_path(directory)),
                "user_file": str(user_settings_path()),
                "settings": values,
                "per_user": [key for key in SPECS if per_user(key)],
                "user": {key: get_own(key) for key in OWN_KEYS},
            }
        )
        return 0
    from workbench.configs.paths import is_packaged_defaults

    if is_packaged_defaults(directory):
        print(f"# {settings_path(directory)} (installed defaults, read-only: `workbench init DIR`)")
    else:
        print(f"# {settings_path(directory)} (tracked: changes what Nix builds)")
    print(f"# {user_settings_path()} (yours, on this host: marked [user])")
    width = max(len(key) for key in (*SPECS, *OWN_KEYS))
    for key, spec in SPECS.items():
        mark = " [user]" if per_user(key) else ""
        print(
            f"{key:{width}} = {format_value(getattr(settings, key)) or '(empty)'}"
            f"    # {spec.meaning}{mark}"
        )
    for key, meaning in OWN_KEYS.items():
        print(f"{key:{width}} = {get_own(key) or '(not set)'}    # {meaning} [user]")
    return 0


def _value_words(args: argparse.Namespace) -> str:
    """The value of `config set KEY VALUE...`: its words joined by spaces (argparse has taken
    a `--` before them away). --config and --state-dir among them are still the global options,
    as after every other command; none is a compiler flag or a setting's value."""
    from workbench.cli.main import GLOBAL_OPTIONS
    from workbench.errors import WorkbenchError

    words = list(args.value)
    kept: list[str] = []
    while words:
        word = words.pop(0)
        name, equals, value = word.partition("=")
        if name not in GLOBAL_OPTIONS:
            kept.append(word)
            continue
        if not equals:
            if not words:
                raise WorkbenchError(f"{name} needs a directory")
            value = words.pop(0)
        setattr(args, name[2:].replace("-", "_"), value)
    if not kept:
        raise WorkbenchError(
            f"config set {args.key}: give the value, e.g. `workbench config set {args.key} VALUE`"
        )
    return " ".join(kept)

"""`workbench push`: a build's outputs and their closures copied to a store or binary cache.

The copy is `nix copy --to STORE PATH...` (the closure goes with each path), run under a
supervisor like any build, so it is logged, followed, stoppable and in the history. Signing
with the user's secret key (`nix-store --generate-binary-cache-key`): a binary cache (file://,
s3://) signs what it writes with `?secret-key=FILE` (Nix's BinaryCacheStore); an ssh store gets
paths signed in this store first (`nix store sign -r --key-file FILE`), which a nix-daemon
allows only to trusted users.
"""

from __future__ import annotations

import re
import subprocess
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from workbench.host.bounded_command import run_bounded

STORE_SCHEMES = ("file", "ssh", "ssh-ng", "s3")
BINARY_CACHES = ("file", "s3")
_STORE_URL = re.compile(
    r"^(?P<scheme>file|ssh|ssh-ng|s3)://(?P<where>[A-Za-z0-9._~/@:+-]+)"
    r"(?:\?(?P<query>[A-Za-z0-9._~/=?&%:+-]*))?$"
)
ALLOWED = (
    "file:///ABSOLUTE/PATH, ssh://[USER@]HOST, ssh-ng://[USER@]HOST or s3://BUCKET, each with "
    "an optional ?key=value query, no spaces"
)
NIX_FLAGS = ["--extra-experimental-features", "nix-command"]
SIGN_TIMEOUT_S = 300.0


def store_url_problem(value: str) -> str | None:
    """Why `value` is not a store `workbench push` copies to (None: it is one)."""
    found = _STORE_URL.match(value)
    if found is None:
        return "not a store URL"
    if found["scheme"] == "file" and not found["where"].startswith("/"):
        return "a file:// store needs an absolute path (file:///srv/cache)"
    if found["where"].startswith("-") or "/-" in found["where"]:
        return "a part starts with '-'"
    return None


@dataclass(frozen=True)
class PushPlan:
    """What a push copies, where, and the one command that does it."""

    build_id: int
    outputs: tuple[str, ...]
    store: str  # as the user named it (shown and recorded: never the key file)
    signing_key: str | None
    argv: tuple[str, ...]
    sign_first: tuple[str, ...] | None  # `nix store sign` to run before an ssh push

    def to_json(self) -> dict[str, Any]:
        return {
            "build_id": self.build_id,
            "outputs": list(self.outputs),
            "store": self.store,
            "signing_key": self.signing_key,
            "argv": list(self.argv),
        }


def plan_push(
    build_id: int, outputs: tuple[str, ...], store: str, signing_key: str | None
) -> PushPlan:
    """The `nix copy` of `outputs` to `store`, signed with `signing_key` when given."""
    scheme = store.split("://", 1)[0]
    target = store
    sign_first = None
    key = str(Path(signing_key).expanduser()) if signing_key else None
    if key and scheme in BINARY_CACHES:
        target += ("&" if "?" in store else "?") + f"secret-key={key}"
    elif key:
        sign_first = ("nix", *NIX_FLAGS, "store", "sign", "-r", "--key-file", key, *outputs)
    argv = ("nix", *NIX_FLAGS, "copy", "-v", "--to", target, *outputs)
    return PushPlan(build_id, outputs, store, key, argv, sign_first)


def sign_locally(plan: PushPlan) -> str | None:
    """Run the plan's `nix store sign` (ssh stores); None when done, else why it failed."""
    if plan.sign_first is None:
        return None
    try:
        done = run_bounded(plan.sign_first, SIGN_TIMEOUT_S)
    except FileNotFoundError:
        return "nix is not installed"
    except subprocess.TimeoutExpired:
        return f"nix store sign took over {SIGN_TIMEOUT_S:.0f} s"
    if done.returncode == 0:
        return None
    said = [line for line in done.stderr.splitlines() if line.strip()]
    return (said[-1] if said else f"nix store sign exited {done.returncode}")[:300]

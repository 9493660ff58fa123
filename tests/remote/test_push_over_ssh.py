"""`workbench push ID --to ssh-ng://...`: a build's outputs and closure copied over real SSH into
the loopback host's second store, signed in this store first with the user's key."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest
from cache_flake import DEP, make_cache_flake, nix
from loopback_sshd import LoopbackHost
from needed_tools import needs
from nix_testing import NIX_CONFIG
from supervision.supervised import Bench, build_id_from

from workbench.history.records import SUCCEEDED
from workbench.planning.launch import host_platform

pytestmark = [
    pytest.mark.nix,
    pytest.mark.slow,
    needs("nix", debian="nix-bin"),
]


def test_a_build_is_pushed_signed_to_a_second_store_over_ssh(
    bench: Bench, loopback_host: LoopbackHost, tmp_path: Path
) -> None:
    flake = make_cache_flake(tmp_path / "flake", host_platform())
    secret, public = tmp_path / "key.sec", tmp_path / "key.pub"
    made = subprocess.run(
        ["nix-store", "--generate-binary-cache-key", "workbench-ssh-1", str(secret), str(public)],
        capture_output=True, text=True, check=False,
    )  # fmt: skip
    assert made.returncode == 0, made.stderr
    known = tmp_path / "known_hosts"
    known.write_text(f"[127.0.0.1]:{loopback_host.port} {loopback_host.host_public_key}\n")
    bench.extra_env["NIX_CONFIG"] = NIX_CONFIG
    # How Nix's ssh reaches the loopback host (its port and key): NIX_SSHOPTS, as a user's
    # ssh config would.
    bench.extra_env["NIX_SSHOPTS"] = (
        f"-p {loopback_host.port} -i {loopback_host.client_key} -o IdentitiesOnly=yes "
        f"-o UserKnownHostsFile={known} -o StrictHostKeyChecking=yes"
    )
    built = bench.run("build", "cpu", "-C", str(flake), "--jobs", "1", timeout=300)
    build_id = build_id_from(built.stderr)
    assert bench.record(build_id).state == SUCCEEDED, built.stderr[-2000:]
    top = str((flake / "result-onnxruntime-cpu").resolve())
    store = f"ssh-ng://root@127.0.0.1?remote-store=local?root={loopback_host.remote_store_root}"
    # Unsigned, the other store refuses it (it requires signatures by keys it trusts); the
    # history records no push.
    unsigned = bench.run("push", str(build_id), "--to", store, timeout=300)
    assert unsigned.returncode == 1
    assert "because it lacks a valid signature" in unsigned.stderr, unsigned.stderr[-2000:]
    assert bench.json("push", str(build_id), "--list", "--json")["pushes"] == []
    # The other store trusts the user's public key (its nix.conf, as its admin would set it).
    remote_conf = loopback_host.directory / "remote-nix" / "nix.conf"
    remote_conf.write_text(
        remote_conf.read_text() + f"trusted-public-keys = {public.read_text().strip()}\n"
    )
    pushed = bench.run("push", str(build_id), "--to", store, "--signing-key", str(secret),
                       timeout=300)  # fmt: skip
    assert pushed.returncode == 0, pushed.stderr[-3000:]
    assert f"workbench: pushed {top} to {store}" in pushed.stderr
    # The closure is in the second store, and signed with the key here before it went.
    dep = next(path for path in nix("path-info", "-r", top).split() if path.endswith(DEP))
    for path in (top, dep):
        assert (loopback_host.remote_store_root / path.lstrip("/")).exists(), path
    signatures = nix("path-info", "--sigs", top)
    assert "workbench-ssh-1:" in signatures, signatures
    (push,) = bench.json("push", str(build_id), "--list", "--json")["pushes"]
    assert (push["store"], push["signed_by"]) == (store, str(secret))

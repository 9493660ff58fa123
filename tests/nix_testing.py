"""What the Nix tests share: the configuration Nix runs with here, and the skip without Nix."""

from __future__ import annotations

import contextlib
import fcntl
import grp
import os
import pwd
import shutil
import subprocess
import time
from collections.abc import Iterator, Sequence
from pathlib import Path

import pytest
from needed_tools import needs

# Flakes on, no sandbox (Debian's nix-bin has none), no binary cache (no network), and no
# build users: Debian's nix.conf names the `nixbld` group, which a fresh machine may not have
# (Nix then refuses every build), and the tests run Nix as root or as themselves anyway.
NIX_CONFIG = (
    "experimental-features = nix-command flakes\nsandbox = false\nsubstituters =\n"
    "build-users-group ="
)

# For the tests about Nix's build users (builders running as nixbld*): the group and users
# ensure_build_users() makes where a fresh machine lacks them.
NIX_CONFIG_BUILD_USERS = NIX_CONFIG + "\nbuild-users-group = nixbld"


def ensure_build_users() -> None:
    """Debian's nix-bin creates the nixbld group and users; create them if they are missing."""
    try:
        members = grp.getgrnam("nixbld").gr_mem
    except KeyError:
        subprocess.run(["groupadd", "--system", "nixbld"], check=True)
        members = []
    for n in range(1, 5):
        name = f"nixbld{n}"
        if name in members:
            continue
        exists = subprocess.run(["id", name], capture_output=True, check=False).returncode == 0
        if not exists:
            subprocess.run(
                [
                    "useradd",
                    "--system",
                    "--no-create-home",
                    "--shell",
                    "/usr/sbin/nologin",
                    "--gid",
                    "nixbld",
                    "--groups",
                    "nixbld",
                    name,
                ],
                check=True,
            )
        else:
            subprocess.run(["usermod", "-a", "-G", "nixbld", name], check=True)


# Nix's state directory (NIX_STATE_DIR, else nix-bin's default): userpool/UID in it is the lock
# of each build user, taken by every Nix on this machine (all the tests' daemons included).
NIX_STATE_DIR = Path(os.environ.get("NIX_STATE_DIR", "/nix/var/nix"))


@contextlib.contextmanager
def held_build_user(timeout_s: float = 120, among: Sequence[str] = ()) -> Iterator[str]:
    """A Nix build user (a member of `nixbld`, or of `among` when given), held as a Nix build
    holds its own, for a process that stands in for a builder; its name.

    Nix takes a build user by locking userpool/UID (flock) and, before and after each build,
    kills every process of that uid (Nix 2.8: src/libstore/lock.cc, UserLock, and
    build/local-derivation-goal.cc, killSandbox). A stand-in run as nixbld1 without the lock is
    killed by any Nix build another test runs meanwhile (pytest -n 2); held, Nix takes another
    user. While every build user is taken it waits, as Nix does; after `timeout_s` it fails
    saying so."""
    ensure_build_users()
    pool = NIX_STATE_DIR / "userpool"
    pool.mkdir(mode=0o755, parents=True, exist_ok=True)
    members = list(among) or sorted(grp.getgrnam("nixbld").gr_mem)
    deadline = time.monotonic() + timeout_s
    while True:
        for name in members:
            uid = pwd.getpwnam(name).pw_uid
            fd = os.open(pool / str(uid), os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o600)
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                os.close(fd)
                continue
            try:
                yield name
            finally:
                os.close(fd)  # the lock goes with it
            return
        if time.monotonic() > deadline:
            raise AssertionError(
                f"no Nix build user free within {timeout_s:g} s: {', '.join(members)} all held "
                f"by builds ({pool})"
            )
        time.sleep(0.2)


@contextlib.contextmanager
def as_build_user(user: str, argv: Sequence[str], name: str | None = None) -> Iterator[int]:
    """`argv` run as the build user `user` (held: `held_build_user`) through runuser, from /, in
    a session of its own, as a builder stands in; the pid of the program as `user` (runuser's
    child, once named `name`: `argv[0]`'s file unless it execs another). Everything it started
    is killed at the end."""
    import psutil

    process = subprocess.Popen(
        ["runuser", "-u", user, "--", *argv], cwd="/", start_new_session=True
    )
    try:
        yield _child_of(process.pid, user, name or os.path.basename(argv[0]))
    finally:
        below = psutil.Process(process.pid).children(recursive=True)
        process.kill()
        for child in below:
            with contextlib.suppress(psutil.Error):
                child.kill()
        process.wait(timeout=30)


def _child_of(pid: int, user: str, name: str) -> int:
    """runuser's child `name`, running as `user` (runuser forks it)."""
    import psutil

    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        for child in psutil.Process(pid).children():
            with contextlib.suppress(psutil.Error):
                if child.username() == user and child.name() == name:
                    return child.pid
        time.sleep(0.01)
    raise AssertionError(f"runuser's {name} as {user} never came within 30 s")


needs_nix = [pytest.mark.nix, needs("nix-instantiate", debian="nix-bin")]


def nix_env(tmp_path: Path) -> dict[str, str]:
    """The environment for a Nix command: NIX_CONFIG above and a private cache directory."""
    env = dict(os.environ)
    env["NIX_CONFIG"] = NIX_CONFIG
    env["XDG_CACHE_HOME"] = str(tmp_path / "nix-cache")
    return env


# A patch series for the tests, in a deliberately non-alphabetical order, with patches for
# several flavours and variant patterns, one disabled (and without a file: nothing selects it,
# so nothing may ask for it) and one whose file is not NAME.patch. What each package gets is
# spelled out in SAMPLE_APPLIED.
SAMPLE_SERIES = """\
# A test series (tests/nix_testing.py).

[[patches]]
name = "zeta-static-init"
file = "zeta-static-init.patch"
group = "static-init"
fixes = "Static initialisation order"
flavours = ["cuda-static"]
variants = []
enabled = true

[[patches]]
name = "alpha-bridge"
file = "alpha-bridge.patch"
group = "bridge-loop"
fixes = "A bridge loop, for both CUDA flavours and the CUDA 12.9 variants"
flavours = ["cuda-static", "cuda-dyn"]
variants = ["onnxruntime-python313-cuda12_9-*"]
enabled = true

[[patches]]
name = "mid-disabled"
file = "mid-disabled.patch"
group = "local"
fixes = "Applies everywhere, but is disabled"
flavours = ["cpu", "cuda-dyn", "cuda-static"]
variants = ["*"]
enabled = false

[[patches]]
name = "beta-all-variants"
file = "beta-all-variants.patch"
group = "portability"
fixes = "Every variant, no flavour"
flavours = []
variants = ["*"]
enabled = true

[[patches]]
name = "gamma-sm90"
file = "gamma-sm90.patch"
group = "build-system"
fixes = "Hopper variants, and the CPU flavour"
flavours = ["cpu"]
variants = ["*-sm90-*"]
enabled = true

[[patches]]
name = "delta-cpu"
file = "delta-cpu.patch"
group = "build-system"
fixes = "CPU-only variants and the CPU flavour"
flavours = ["cpu"]
variants = ["onnxruntime-python313-cpu-*"]
enabled = true

[[patches]]
name = "epsilon.exact_name"
file = "Epsilon-Exact.patch"
group = "local"
fixes = "One variant named in full"
flavours = []
variants = ["onnxruntime-python313-cuda12_9-sm86-avx512"]
enabled = true
"""

# Patch name -> file, for the patches SAMPLE_SERIES needs files for (mid-disabled has none).
SAMPLE_FILES = {
    "zeta-static-init": "zeta-static-init.patch",
    "alpha-bridge": "alpha-bridge.patch",
    "beta-all-variants": "beta-all-variants.patch",
    "gamma-sm90": "gamma-sm90.patch",
    "delta-cpu": "delta-cpu.patch",
    "epsilon.exact_name": "Epsilon-Exact.patch",
}

# What SAMPLE_SERIES applies, in order, to each flavour and to a few variants.
SAMPLE_APPLIED = {
    "cpu": ["gamma-sm90", "delta-cpu"],
    "cuda-dyn": ["alpha-bridge"],
    "cuda-static": ["zeta-static-init", "alpha-bridge"],
    "onnxruntime-python313-cuda12_9-sm90-avx512": [
        "alpha-bridge",
        "beta-all-variants",
        "gamma-sm90",
    ],
    "onnxruntime-python313-cuda12_9-sm75-avx2": ["alpha-bridge", "beta-all-variants"],
    "onnxruntime-python313-cuda12_9-sm90-armv9": [
        "alpha-bridge",
        "beta-all-variants",
        "gamma-sm90",
    ],
    "onnxruntime-python313-cuda12_9-sm86-avx512": [
        "alpha-bridge",
        "beta-all-variants",
        "epsilon.exact_name",
    ],
    "onnxruntime-python313-cpu-avx2": ["beta-all-variants", "delta-cpu"],
}


def patch_text(name: str) -> str:
    """The contents of a test patch file: different for each, so each has its own store path."""
    return f"# test patch {name}\n"


def repo_copy(
    tmp_path: Path, series: str | None = SAMPLE_SERIES, files: dict[str, str] | None = None
) -> tuple[Path, Path]:
    """configs/ and patches/ copied side by side under tmp_path/repo: (configs, patches).

    patches/ holds `series` as series.toml (none when None) and a file for each entry of `files`
    (patch name -> file name; SAMPLE_FILES by default), written with patch_text.
    """
    configs = tmp_path / "repo" / "configs"
    shutil.copytree(Path(__file__).resolve().parent.parent / "configs", configs)
    patches = configs.parent / "patches"
    patches.mkdir()
    if series is not None:
        (patches / "series.toml").write_text(series)
    for name, file in (SAMPLE_FILES if files is None else files).items():
        (patches / file).write_text(patch_text(name))
    return configs, patches


REPO = Path(__file__).resolve().parent.parent


def flake_on_the_standin(tmp_path: Path, with_static_patches: bool = False) -> Path:
    """A copy of the checkout whose flake takes the stand-in nixpkgs as its nixpkgs input (a
    path flake: tmp_path/standin holds it as default.nix), with .flox/ and the real configs."""
    standin = tmp_path / "standin"
    standin.mkdir(parents=True)
    shutil.copy(REPO / "tests" / "nix" / "standin-nixpkgs.nix", standin / "default.nix")
    (standin / "flake.nix").write_text("{ outputs = _: { }; }\n")
    repo = tmp_path / "repo"
    repo.mkdir(parents=True)
    for name in ("pyproject.toml", "README.md", ".gitignore"):
        shutil.copy(REPO / name, repo / name)
    for name in ("nix", "configs", "patches", "workbench", ".flox"):
        shutil.copytree(
            REPO / name, repo / name, ignore=shutil.ignore_patterns("__pycache__", "*.pyc")
        )
    flake = (REPO / "flake.nix").read_text()
    pinned = 'inputs.nixpkgs.url = "github:NixOS/nixpkgs/'
    assert pinned in flake
    flake = flake.replace(
        flake[flake.index(pinned) : flake.index("\n", flake.index(pinned))],
        f'inputs.nixpkgs.url = "path:{standin}";',
    )
    (repo / "flake.nix").write_text(flake)
    if with_static_patches:
        series = (REPO / "patches" / "series.toml").read_text()
        for line in series.splitlines():
            if line.startswith("file = "):
                name = line.split('"')[1]
                (repo / "patches" / name).write_text(patch_text(name.removesuffix(".patch")))
    return repo

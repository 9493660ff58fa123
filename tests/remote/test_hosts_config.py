"""configs/hosts.toml: what it accepts, and one error line naming file, line, value and what is
allowed for what it does not."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from workbench.errors import ConfigError
from workbench.remote.config import load_hosts

GOOD_HOST = """
[[hosts]]
name = "big1"
store = "ssh-ng://builder@big1.example.org?remote-store=local?root=/srv/store"
port = 2222
ssh_key = "~/.ssh/id_ed25519"
systems = ["x86_64-linux", "aarch64-linux"]
max_jobs = 4
speed_factor = 2
features = ["big-parallel", "cuda", "gccarch-x86-64-v3"]
"""


def _write(config_copy: Path, text: str) -> Path:
    path = config_copy / "hosts.toml"
    path.write_text(path.read_text() + text)
    return path


def test_the_shipped_file_is_valid_and_builds_locally(config_copy: Path) -> None:
    config = load_hosts(config_copy)
    assert config.local_builds is True
    assert config.hosts == ()


def test_no_file_means_this_machine_alone(config_copy: Path) -> None:
    (config_copy / "hosts.toml").unlink()
    config = load_hosts(config_copy)
    assert (config.local_builds, config.hosts) == (True, ())


def test_a_host_is_read_with_its_defaults_and_an_alias_for_nix(config_copy: Path) -> None:
    _write(config_copy, GOOD_HOST + '\n[[hosts]]\nname = "small"\nstore = "ssh://small"\n')
    big, small = load_hosts(config_copy).hosts
    assert big.store_uri == "ssh-ng://builder@workbench-big1?remote-store=local?root=/srv/store"
    assert (big.address, big.port, big.user) == ("big1.example.org", 2222, "builder")
    assert big.features == ("big-parallel", "cuda", "gccarch-x86-64-v3")
    assert (small.scheme, small.port, small.max_jobs, small.speed_factor) == ("ssh", 22, 1, 1)
    assert small.systems == ("x86_64-linux",) and small.enabled


@pytest.mark.parametrize(
    ("entry", "line", "shown", "allowed"),
    [
        ('name = "a"\nstore = "http://x"', 5, "store = 'http://x'", "ssh-ng://"),
        ('name = "a"\nstore = "ssh://x:22"', 5, "store = 'ssh://x:22'", "ssh-ng://"),
        ('name = "a"\nstore = "ssh://x"\nmax_jobs = 0', 6, "max_jobs = 0", "from 1 to 256"),
        ('name = "a"\nstore = "ssh://x"\nport = "22"', 6, "port = '22'", "1 to 65535"),
        ('name = "a"\nstore = "ssh://x"\nfeatures = ["a b"]', 6, "features", "feature names"),
        ('name = "A B"\nstore = "ssh://x"', 4, "name = 'A B'", "lower-case letters"),
        ('name = "a"\nstore = "ssh://x;rm"', 5, "store = 'ssh://x;rm'", "ssh-ng://"),
        ('name = "a"\nstore = "ssh://x"\nssh_key = "-oProxyCommand=x"', 6, "ssh_key", "a path"),
    ],
)
def test_a_bad_value_names_file_line_value_and_what_is_allowed(
    config_copy: Path, entry: str, line: int, shown: str, allowed: str
) -> None:
    path = config_copy / "hosts.toml"
    path.write_text("local_builds = true\n\n[[hosts]]\n" + entry + "\n")
    with pytest.raises(ConfigError) as caught:
        load_hosts(config_copy)
    message = str(caught.value)
    assert message.startswith(f"{path}:{line}: ")
    assert shown in message and "refused" in message and allowed in message


def test_unknown_key_duplicate_name_and_no_builder_at_all(config_copy: Path) -> None:
    path = config_copy / "hosts.toml"
    path.write_text('[[hosts]]\nname = "a"\nstore = "ssh://x"\nmaxjobs = 2\n')
    with pytest.raises(ConfigError, match=rf"^{path}:4: unknown key 'maxjobs'"):
        load_hosts(config_copy)
    path.write_text(
        '[[hosts]]\nname = "a"\nstore = "ssh://x"\n[[hosts]]\nname = "a"\nstore = "ssh://y"\n'
    )
    with pytest.raises(ConfigError, match=rf"^{path}:5: name = 'a': refused \(used by"):
        load_hosts(config_copy)
    path.write_text("local_builds = false\n")
    with pytest.raises(ConfigError, match=rf"^{path}:1: local_builds = false: refused"):
        load_hosts(config_copy)


def test_the_command_line_says_it_in_one_line_and_exits_2(
    config_copy: Path, tmp_path: Path
) -> None:
    (config_copy / "hosts.toml").write_text('[[hosts]]\nname = "a"\nstore = "ftp://x"\n')
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "workbench",
            "--config",
            str(config_copy),
            "--state-dir",
            str(tmp_path / "state"),
            "hosts",
        ],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert done.returncode == 2
    assert done.stderr.count("\n") == 1 and done.stderr.startswith("workbench: error: ")
    assert "hosts.toml:3: store = 'ftp://x': refused" in done.stderr

"""hosts.toml's push_to and signing_key: checked where they are read, each refusal naming the
file, the line, the value and what is allowed."""

from __future__ import annotations

from pathlib import Path

import pytest

from workbench.errors import ConfigError
from workbench.remote.config import load_hosts


def _write(tmp_path: Path, text: str) -> Path:
    (tmp_path / "hosts.toml").write_text(text)
    return tmp_path


def test_a_cache_and_a_key_are_read(tmp_path: Path) -> None:
    config = load_hosts(
        _write(
            tmp_path, 'push_to = "file:///srv/cache?compression=zstd"\nsigning_key = "~/k.sec"\n'
        )
    )
    assert (config.push_to, config.signing_key) == ("file:///srv/cache?compression=zstd", "~/k.sec")
    assert load_hosts(_write(tmp_path, "local_builds = true\n")).push_to == ""


@pytest.mark.parametrize(
    ("line", "said"),
    [
        ('push_to = "http://cache.example.org"', "refused (not a store URL)"),
        ('push_to = "file://relative/dir"', "needs an absolute path"),
        ('push_to = "ssh-ng://-oProxyCommand"', "a part starts with '-'"),
        ("push_to = 3", "refused (not a string)"),
        ('signing_key = "a key with spaces"', "signing_key = 'a key with spaces': refused"),
    ],
)
def test_a_bad_value_is_refused_with_its_line(tmp_path: Path, line: str, said: str) -> None:
    directory = _write(tmp_path, f"# a cache\nlocal_builds = true\n{line}\n")
    with pytest.raises(ConfigError) as refused:
        load_hosts(directory)
    message = str(refused.value)
    assert message.startswith(f"{directory / 'hosts.toml'}:3: ") and said in message
    assert "allowed: " in message

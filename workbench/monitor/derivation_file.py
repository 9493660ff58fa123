"""What a Nix derivation file builds: the store paths of its outputs, read from the `.drv`.

A `.drv` in /nix/store is world-readable ATerm text whose first element lists the outputs:

    Derive([("out","/nix/store/<hash>-name","",""),("dev","/nix/store/<hash>-name-dev","","")],
           [...input derivations...],[...sources...],"x86_64-linux","/bin/sh",[...],[...env...])

Each output is (name, path, hash algorithm, hash); the path is "" where Nix does not know it
before the build (a floating content-addressed or deferred output). Strings are in double quotes
with backslash escapes (\\n, \\r, \\t; any other escaped character is itself). Derivations that
use the experimental dynamic-derivations feature start `DrvWithVersion("xp-dyn-drv",` instead of
`Derive(`, the rest alike. Format as Nix reads it: NixOS/nix src/libstore/derivations.cc,
`parseDerivation` and `parseString`, commit 0013853fe328db51228d790a52898591da56eaa6.

Standard library only: the sampler is shipped to build hosts (`workbench.remote.remote_sampler`).
"""

from __future__ import annotations

import hashlib

# A derivation's outputs are its first few hundred bytes; the rest (its environment: a builder
# script inline, a list of patches) can be megabytes. Read this much: outputs cut off in it are
# taken for unreadable (the caller falls back to the derivation's name).
_READ_AT_MOST = 64 * 1024
_ESCAPED = {"n": "\n", "r": "\r", "t": "\t"}
# Nix's base-32 digits (no e, o, u, t): src/libutil/hash.cc `base32Chars`.
_BASE32 = "0123456789abcdfghijklmnpqrsvwxyz"


def derivation_name(drv_path: str) -> str:
    """The name in a derivation's path: "/nix/store/HASH-ort-1.23.2.drv" gives "ort-1.23.2"."""
    base = drv_path.rpartition("/")[2].removesuffix(".drv")
    # A store path's base name is a 32-character hash, a dash, then the name.
    return base[33:] if len(base) > 33 and base[32] == "-" else base


def scratch_path(drv_path: str, output_path: str) -> str:
    """The store path a builder of `drv_path` writes `output_path` to when Nix builds it again
    beside a present copy (`--check`, `--rebuild`, `--repair` without a sandbox): its `out` is
    then this path, not the output's.

    Nix's `LocalDerivationGoal::makeFallbackPath(const StorePath &)`: `makeStorePath("rewrite:"
    + drv base name + ":" + output base name, the all-zero SHA-256, output name)`; and
    `Store::makeStorePath`: SHA-256 of "TYPE:sha256:HEX:STORE_DIR:NAME", folded to 20 bytes,
    in Nix's base 32 (NixOS/nix src/libstore/build/local-derivation-goal.cc and
    src/libstore/store-api.cc, src/libutil/hash.cc `compressHash`, `printHash32`; checked
    against Nix 2.8's `nix-build --check` here: tests/monitor/test_derivation_file.py)."""
    drv_base = drv_path.rpartition("/")[2]
    store, _, output_base = output_path.rpartition("/")
    name = output_base[33:]
    kind = f"rewrite:{drv_base}:{output_base}"
    text = f"{kind}:sha256:{'0' * 64}:{store}:{name}"
    digest = hashlib.sha256(text.encode("utf-8", "surrogateescape")).digest()
    folded = bytearray(20)
    for index, byte in enumerate(digest):
        folded[index % 20] ^= byte
    return f"{store}/{_nix_base32(bytes(folded))}-{name}"


def _nix_base32(data: bytes) -> str:
    """Nix's base 32: the last 5-bit group first (`printHash32`)."""
    digits = []
    for group in range((len(data) * 8 - 1) // 5, -1, -1):
        bit = group * 5
        index, shift = divmod(bit, 8)
        value = data[index] >> shift
        if index + 1 < len(data):
            value |= data[index + 1] << (8 - shift)
        digits.append(_BASE32[value & 0x1F])
    return "".join(digits)


def read_outputs(drv_path: str) -> dict[str, str] | None:
    """Output name -> store path ("" where not known before the build) of the derivation file
    `drv_path`; None if it cannot be read or is not a derivation."""
    try:
        with open(drv_path, "rb") as handle:
            data = handle.read(_READ_AT_MOST)
    except OSError:
        return None
    try:
        return parse_outputs(data.decode("utf-8", "surrogateescape"))
    except ValueError:
        return None


def parse_outputs(text: str) -> dict[str, str]:
    """The outputs of a derivation in ATerm text (output name -> store path, "" where Nix does
    not know it before the build). Only the outputs list is read: `text` may be cut after it.
    Raises ValueError where the text is no derivation."""
    reader = _Reader(text)
    if reader.take("DrvWithVersion("):
        reader.string()  # the version ("xp-dyn-drv"): the outputs are written alike
        reader.expect(",")
    else:
        reader.expect("Derive(")
    reader.expect("[")
    outputs: dict[str, str] = {}
    while not reader.end_of_list():
        reader.expect("(")
        name = reader.string()
        reader.expect(",")
        path = reader.string()
        for _ in range(2):  # the hash algorithm and the hash: a fixed output's
            reader.expect(",")
            reader.string()
        reader.expect(")")
        if path and not path.startswith("/"):
            raise ValueError(f"bad path {path!r} in derivation")
        outputs[name] = path
    if not outputs:
        raise ValueError("a derivation without outputs")
    return outputs


class _Reader:
    """A cursor over ATerm text, as Nix's `DerivationParserContext` reads it."""

    __slots__ = ("at", "text")

    def __init__(self, text: str) -> None:
        self.text = text
        self.at = 0

    def take(self, expected: str) -> bool:
        if self.text.startswith(expected, self.at):
            self.at += len(expected)
            return True
        return False

    def expect(self, expected: str) -> None:
        if not self.take(expected):
            raise ValueError(f"expected {expected!r} at offset {self.at}")

    def end_of_list(self) -> bool:
        """Past a "," between elements (False) or the closing "]" (True), as Nix's `endOfList`."""
        if self.take(","):
            return False
        return self.take("]")

    def string(self) -> str:
        self.expect('"')
        parts: list[str] = []
        text = self.text
        while True:
            stop = _next_special(text, self.at)
            if stop < 0:
                raise ValueError("a string that does not end")
            parts.append(text[self.at : stop])
            self.at = stop + 1
            if text[stop] == '"':
                return "".join(parts)
            if self.at >= len(text):
                raise ValueError("a string that does not end")
            escaped = text[self.at]
            parts.append(_ESCAPED.get(escaped, escaped))
            self.at += 1


def _next_special(text: str, start: int) -> int:
    """The offset of the next '"' or '\\' from `start`, -1 if none."""
    quote = text.find('"', start)
    backslash = text.find("\\", start, quote if quote >= 0 else len(text))
    return backslash if backslash >= 0 else quote

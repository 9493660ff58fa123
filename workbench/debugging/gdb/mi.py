"""A fast parser for gdb/MI output lines, giving the same dicts as pygdbmi's parser.

pygdbmi's parser walks a record one character at a time and formats a debug message (with
colour codes) for every step even when logging is off; on a 64-thread capture that was
about a fifth of the whole capture time. This one tokenises each line with one regular
expression. Lines it cannot read are handed to pygdbmi's parser, so nothing is lost.
"""

from __future__ import annotations

import re
from typing import Any

_START = re.compile(r"(\d*)([\^*+=])([a-zA-Z-]+)")
_STREAM = re.compile(r'([~@&])(".*")\s*$')
_TOKEN = re.compile(r'"(?:[^"\\]|\\.)*"|[{}\[\],=]|[^{}\[\],="]+')
_RECORD_TYPES = {"^": "result", "*": "notify", "+": "notify", "=": "notify"}
_STREAM_TYPES = {"~": "console", "@": "target", "&": "log"}


class MiSyntaxError(ValueError):
    """The line is not well-formed MI output."""


def unescape(text: str) -> str:
    """The value of an MI C string (quotes included): escapes and octal bytes decoded."""
    body = text[1:-1]
    if "\\" not in body:
        return body
    from pygdbmi.gdbescapes import unescape as pygdbmi_unescape

    return pygdbmi_unescape(body)


def parse_line(line: str) -> dict[str, Any]:
    """One MI output line → {"type", "message", "payload", "token"} like pygdbmi's."""
    stream = _STREAM.match(line)
    if stream:
        return {
            "type": _STREAM_TYPES[stream.group(1)],
            "message": None,
            "payload": unescape(stream.group(2)),
            "token": None,
        }
    start = _START.match(line)
    if not start:
        return {"type": "output", "message": None, "payload": line, "token": None}
    token_text, sigil, message = start.groups()
    rest = line[start.end() :]
    payload: dict[str, Any] | None = None
    if rest:
        if not rest.startswith(","):
            raise MiSyntaxError(line)
        tokens = _TOKEN.findall(rest[1:])
        payload, end = _results(tokens, 0, closing=None)
        if end != len(tokens):
            raise MiSyntaxError(line)
    return {
        "type": _RECORD_TYPES[sigil],
        "message": message,
        "payload": payload,
        "token": int(token_text) if token_text else None,
    }


def _results(tokens: list[str], index: int, closing: str | None) -> tuple[dict[str, Any], int]:
    """`key=value,key=value` up to `closing` (or the end) → dict, index after it."""
    found: dict[str, Any] = {}
    while index < len(tokens) and tokens[index] != closing:
        key = tokens[index]
        if index + 1 >= len(tokens) or tokens[index + 1] != "=":
            raise MiSyntaxError(key)
        value, index = _value(tokens, index + 2)
        if key in found:  # repeated keys (e.g. a tuple of frame=...) become a list
            previous = found[key]
            found[key] = [*previous, value] if isinstance(previous, list) else [previous, value]
        else:
            found[key] = value
        if index < len(tokens) and tokens[index] == ",":
            index += 1
    return found, index


def _value(tokens: list[str], index: int) -> tuple[Any, int]:
    if index >= len(tokens):
        raise MiSyntaxError("value expected")
    token = tokens[index]
    if token.startswith('"'):
        return unescape(token), index + 1
    if token == "{":
        found, index = _results(tokens, index + 1, closing="}")
        return found, index + 1
    if token == "[":
        return _list(tokens, index + 1)
    raise MiSyntaxError(token)


def _list(tokens: list[str], index: int) -> tuple[list[Any], int]:
    """`[v,v]` or `[k=v,k=v]` (keys dropped, as pygdbmi does) → list, index after `]`."""
    items: list[Any] = []
    while index < len(tokens) and tokens[index] != "]":
        if (
            index + 1 < len(tokens)
            and tokens[index + 1] == "="
            and not tokens[index].startswith('"')
        ):
            value, index = _value(tokens, index + 2)
        else:
            value, index = _value(tokens, index)
        items.append(value)
        if index < len(tokens) and tokens[index] == ",":
            index += 1
    if index >= len(tokens):
        raise MiSyntaxError("unterminated list")
    return items, index + 1

"""C++ function names as gdb prints them, made comparable: no parameters, no return type."""

from __future__ import annotations

import re
from functools import lru_cache

# The same few names come back for every thread and sample (64 threads in one loop): the
# pure functions below are cached.
_CACHE = 4096

_TRAILING_QUALIFIERS = re.compile(r"(\s*(const|volatile|&&|&|noexcept))+$")
_OPENERS = {"(": ")", "<": ">", "[": "]"}


def _matching_open(text: str, close_index: int) -> int:
    """Index of the bracket that opens the one closing at close_index, or -1."""
    closer = text[close_index]
    opener = {")": "(", ">": "<", "]": "["}[closer]
    depth = 0
    for index in range(close_index, -1, -1):
        char = text[index]
        if char == closer:
            depth += 1
        elif char == opener:
            depth -= 1
            if depth == 0:
                return index
    return -1


@lru_cache(maxsize=_CACHE)
def strip_signature(name: str) -> str:
    """`ns::C::f<int>(int) const` → `ns::C::f<int>`; a minimal symbol's return type goes too.

    gdb gives names without parameters where there is debug info and with them (and, for
    templates, with the return type) where there are only ELF symbols; both must compare
    equal.
    """
    text = name.strip()
    text = re.sub(r"\s*\[clone [^\]]*\]$", "", text)
    text = _TRAILING_QUALIFIERS.sub("", text)
    if text.endswith(")") and not text.endswith("operator()"):
        start = _matching_open(text, len(text) - 1)
        if start > 0:
            text = _TRAILING_QUALIFIERS.sub("", text[:start].rstrip())
    return _drop_return_type(text)


def _drop_return_type(text: str) -> str:
    depth = 0
    split_at = -1
    for index, char in enumerate(text):
        if char in "(<[":
            depth += 1
        elif char in ")>]":
            depth -= 1
        elif char == " " and depth == 0:
            before = text[:index]
            if before.endswith("operator") or (
                index + 1 < len(text) and not _starts_name(text[index + 1 :])
            ):
                continue
            split_at = index
    return text[split_at + 1 :] if split_at >= 0 else text


def _starts_name(text: str) -> bool:
    return bool(re.match(r"[A-Za-z_(~]", text))


def split_scope(name: str) -> list[str]:
    """`a::B<c::d>::f` → ["a", "B<c::d>", "f"]: splits on `::` outside template brackets."""
    return list(_split_scope(name))


@lru_cache(maxsize=_CACHE)
def _split_scope(name: str) -> tuple[str, ...]:
    parts: list[str] = []
    depth = 0
    current = ""
    index = 0
    while index < len(name):
        char = name[index]
        if char in "<(":
            depth += 1
        elif char in ">)":
            depth -= 1
        if depth == 0 and name.startswith("::", index):
            parts.append(current)
            current = ""
            index += 2
            continue
        current += char
        index += 1
    parts.append(current)
    return tuple(parts)


@lru_cache(maxsize=_CACHE)
def short_name(name: str) -> str:
    """The name without namespaces: class and method (`DataTypeImpl::GetType<float>`)."""
    parts = split_scope(name)
    return "::".join(parts[-2:]) if len(parts) >= 2 else name


@lru_cache(maxsize=_CACHE)
def flatten_template(member: str) -> str:
    """`GetType<float>` → `GetType_float`; `GetType<std::string>` → `GetType_string`.

    This is how ORT's provider bridge names a host method after a template specialisation
    (`DataTypeImpl__GetType_float`).
    """
    if "<" not in member:
        return member
    base, _, rest = member.partition("<")
    arguments = rest.rsplit(">", 1)[0]
    words = [split_scope(argument.strip())[-1] for argument in _split_arguments(arguments)]
    cleaned = [re.sub(r"[^A-Za-z0-9]+", "_", word).strip("_") for word in words]
    return "_".join([base, *[word for word in cleaned if word]])


def _split_arguments(text: str) -> list[str]:
    parts: list[str] = []
    depth = 0
    current = ""
    for char in text:
        if char in "<(":
            depth += 1
        elif char in ">)":
            depth -= 1
        if char == "," and depth == 0:
            parts.append(current)
            current = ""
        else:
            current += char
    parts.append(current)
    return parts


@lru_cache(maxsize=_CACHE)
def display_name(name: str, limit: int = 32) -> str:
    """short_name with long template argument lists shown as `<…>`, for one-line output."""
    text = short_name(name)
    out = []
    depth = 0
    start = 0
    for index, char in enumerate(text):
        if char == "<":
            if depth == 0:
                start = index
            depth += 1
        elif char == ">" and depth:
            depth -= 1
            if depth == 0:
                inner = text[start : index + 1]
                out.append((start, index + 1, "<…>" if len(inner) > limit else inner))
    for begin, end, replacement in reversed(out):
        text = text[:begin] + replacement + text[end:]
    return text

"""The fix for a provider-bridge loop: an ORT_STATIC_PROVIDERS guard, proposed or written.

In a static build the host's own implementation of a bridged function is linked in, and the
provider's bridge stub for it (in provider_bridge_provider.cc) only calls back through
Provider_GetHost(). Wrapping the stub in `#ifndef ORT_STATIC_PROVIDERS` ... `#endif` (what the
builder flake's static-datatype-loop.patch does for GetType<T>) removes the loop.
"""

from __future__ import annotations

import difflib
import re
import shutil
import subprocess
from dataclasses import dataclass
from pathlib import Path

from workbench.debugging.debug_errors import DebugError
from workbench.debugging.model import BridgePair, ProposedPatch

BRIDGE_FILE = "onnxruntime/core/providers/shared_library/provider_bridge_provider.cc"
GUARD = "ORT_STATIC_PROVIDERS"
PATCH_NAME = re.compile(r"^[a-z0-9][a-z0-9._-]*\.patch$")
_CONTROL = re.compile(r"^\s*(if|for|while|switch|catch|else|do)\b")
_GUARDED = re.compile(rf"^\s*#\s*(ifndef\s+{GUARD}\b|if\s+!\s*defined\s*\(?\s*{GUARD}\b)")


def host_method_name(pair: BridgePair) -> str:
    """`ProviderHostImpl::DataTypeImpl__GetType_float` → `DataTypeImpl__GetType_float`."""
    return pair.host_method.rsplit("::", 1)[-1]


def propose(pair: BridgePair) -> ProposedPatch:
    """The guard to add, shown as a snippet (no source tree needed)."""
    method = host_method_name(pair)
    snippet = "\n".join(
        [
            f"#ifndef {GUARD}",
            f"// {pair.counterpart}: in a static build the host's own definition is linked in;",
            f"// this stub would call Provider_GetHost()->{method}(), which calls it again.",
            f"<the definition of {pair.counterpart} that returns "
            f"Provider_GetHost()->{method}(...)>",
            f"#endif  // {GUARD}",
        ]
    )
    return ProposedPatch(
        file=BRIDGE_FILE,
        description=(
            f"guard the bridge implementation of {pair.counterpart} in {BRIDGE_FILE} with "
            f"#ifndef {GUARD} so a static build uses the host's own {pair.counterpart} "
            f"(give --source ORT_SOURCE_DIR to write it as a patch)"
        ),
        snippet=snippet,
    )


def default_patch_name(pair: BridgePair) -> str:
    """`DataTypeImpl::GetType<float>` → `static-datatypeimpl-gettype-float-loop.patch`."""
    slug = re.sub(r"[^a-z0-9]+", "-", pair.counterpart.lower()).strip("-")
    return f"static-{slug or 'bridge'}-loop.patch"


def validate_patch_name(name: str) -> str:
    if not PATCH_NAME.match(name):
        raise DebugError(
            f"{name!r} is not a valid patch name: use lower-case letters, digits, '.', '_' "
            "and '-', starting with a letter or digit and ending in .patch"
        )
    return name


@dataclass(frozen=True)
class Definition:
    """Lines [first, last] (0-based, inclusive) of a function definition in the file."""

    first: int
    last: int
    guarded: bool


def find_definitions(text: str, method: str) -> list[Definition]:
    """The definitions whose body calls `method(` (a host method), with their extent."""
    call = re.compile(rf"(->|\.)\s*{re.escape(method)}\s*\(")
    code = _blank_comments_and_strings(text)
    found: list[Definition] = []
    for match in call.finditer(code):
        body_open = _function_brace(code, match.start())
        if body_open is None:
            continue
        body_close = _matching_brace(code, body_open)
        if body_close is None:
            continue
        start = _signature_start(code, body_open)
        first = code.count("\n", 0, start)
        last = code.count("\n", 0, body_close)
        if any(d.first <= first <= d.last for d in found):
            continue
        found.append(Definition(first=first, last=last, guarded=_is_guarded(text, first)))
    return found


def _blank_comments_and_strings(text: str) -> str:
    """The text with comments and string/char literals replaced by spaces (same offsets)."""
    pattern = re.compile(r'//[^\n]*|/\*.*?\*/|"(?:\\.|[^"\\\n])*"|\'(?:\\.|[^\'\\\n])*\'', re.S)
    return pattern.sub(lambda m: re.sub(r"[^\n]", " ", m.group(0)), text)


def _function_brace(code: str, position: int) -> int | None:
    """The `{` opening the function body around `position` (skipping if/for/... blocks)."""
    depth = 0
    index = position
    while index > 0:
        index -= 1
        char = code[index]
        if char == "}":
            depth += 1
        elif char == "{":
            if depth:
                depth -= 1
                continue
            header = code[_statement_start(code, index) : index].strip()
            if header.startswith(("namespace", "extern")) or header.endswith(("=", ",")):
                return None
            if header and not _CONTROL.match(header) and re.search(r"\)\s*[\w\s&]*$", header):
                return index
    return None


def _statement_start(code: str, brace: int) -> int:
    index = brace
    while index > 0 and code[index - 1] not in ";{}":
        index -= 1
    return index


def _signature_start(code: str, brace: int) -> int:
    """Where the definition's first line starts (after the previous `;`, `{` or `}`)."""
    index = _statement_start(code, brace)
    while index < brace and code[index].isspace():
        index += 1
    # A preprocessor line just above (e.g. `#endif`) is not part of the signature.
    while True:
        line_end = code.find("\n", index)
        line = code[index:line_end] if line_end != -1 else code[index:]
        if line.lstrip().startswith("#") and line_end != -1 and line_end < brace:
            index = line_end + 1
            while index < brace and code[index].isspace():
                index += 1
            continue
        break
    return code.rfind("\n", 0, index) + 1


def _matching_brace(code: str, brace: int) -> int | None:
    depth = 0
    for index in range(brace, len(code)):
        if code[index] == "{":
            depth += 1
        elif code[index] == "}":
            depth -= 1
            if depth == 0:
                return index
    return None


def _is_guarded(text: str, line_index: int) -> bool:
    """Whether line `line_index` is inside an open `#ifndef ORT_STATIC_PROVIDERS`."""
    stack: list[bool] = []
    for line in text.splitlines()[:line_index]:
        stripped = line.strip()
        if re.match(r"#\s*if", stripped):
            stack.append(bool(_GUARDED.match(stripped)))
        elif re.match(r"#\s*endif", stripped) and stack:
            stack.pop()
        elif re.match(r"#\s*(else|elif)", stripped) and stack:
            stack[-1] = False
    return any(stack)


def guarded_text(text: str, definitions: list[Definition], pair: BridgePair) -> str:
    """`text` with each unguarded definition wrapped in #ifndef ORT_STATIC_PROVIDERS."""
    lines = text.splitlines(keepends=True)
    if lines and not lines[-1].endswith("\n"):
        lines[-1] += "\n"  # so the #endif after a last-line definition starts its own line
    for definition in sorted(definitions, key=lambda d: d.first, reverse=True):
        if definition.guarded:
            continue
        lines.insert(definition.last + 1, f"#endif  // {GUARD}\n")
        lines.insert(
            definition.first,
            f"#ifndef {GUARD}  // static builds use the host's own {pair.counterpart}\n",
        )
    return "".join(lines)


def unified_diff(old: str, new: str, path: str) -> str:
    """A `git diff`-style patch (a/ and b/ prefixes: `git apply`, `patch -p1`)."""
    old_lines = old.splitlines(keepends=True)
    new_lines = new.splitlines(keepends=True)
    body = []
    for line in difflib.unified_diff(old_lines, new_lines, f"a/{path}", f"b/{path}", n=3):
        if not line.endswith("\n"):
            line += "\n\\ No newline at end of file\n"
        body.append(line)
    return f"diff --git a/{path} b/{path}\n" + "".join(body)


def build_patch(pair: BridgePair, source: Path) -> tuple[str, list[Definition]]:
    """The patch text for `pair` against the ORT tree at `source`."""
    bridge_file = source / BRIDGE_FILE
    try:
        text = bridge_file.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise DebugError(
            f"{source} does not look like an ONNX Runtime source tree: {BRIDGE_FILE} is "
            "missing (pass the directory that holds onnxruntime/ and cmake/)"
        ) from None
    method = host_method_name(pair)
    definitions = find_definitions(text, method)
    if not definitions:
        raise DebugError(
            f"{bridge_file}: no definition calling {method}(...) found; add the guard by hand "
            f"around the bridge implementation of {pair.counterpart}"
        )
    if all(definition.guarded for definition in definitions):
        raise DebugError(
            f"{bridge_file}: the bridge implementation of {pair.counterpart} (line "
            f"{definitions[0].first + 1}) is already inside #ifndef {GUARD}: the loop persists "
            f"because the build does not define {GUARD} (check the flavour's defines and "
            "CMAKE_CXX_FLAGS), or the binary was built before the patch"
        )
    header = (
        f"Guard the provider-bridge stub for {pair.counterpart} with {GUARD}.\n\n"
        f"In a static build {pair.host_method} calls {pair.counterpart}, which is this stub,\n"
        f"which calls Provider_GetHost()->{method}() again: an endless loop.\n"
        "Written by `workbench bt`.\n\n"
    )
    return header + unified_diff(
        text, guarded_text(text, definitions, pair), BRIDGE_FILE
    ), definitions


def check_applies(patch: str, source: Path) -> str | None:
    """`git apply --check` in `source`; None when it applies, else git's complaint."""
    git = shutil.which("git")
    if git is None:
        return None
    done = subprocess.run(
        [git, "apply", "--check", "-"],
        input=patch,
        cwd=source,
        capture_output=True,
        text=True,
        check=False,
    )
    return None if done.returncode == 0 else (done.stderr.strip() or "git apply --check failed")


def write_patch(
    pair: BridgePair, source: Path, patches: Path, name: str | None = None
) -> ProposedPatch:
    """Write the guard as patches/NAME (checked with `git apply --check` first)."""
    from workbench.configs.toml_files import write_atomically

    name = validate_patch_name(name or default_patch_name(pair))
    patch, definitions = build_patch(pair, source)
    complaint = check_applies(patch, source)
    if complaint:
        raise DebugError(f"the generated patch does not apply to {source}: {complaint}")
    target = patches / name
    if target.exists() and target.read_text(encoding="utf-8") != patch:
        raise DebugError(
            f"{target} exists with other content; choose another name with --patch-name"
        )
    patches.mkdir(parents=True, exist_ok=True)
    write_atomically(target, patch)
    lines = ", ".join(f"{d.first + 1}–{d.last + 1}" for d in definitions if not d.guarded)
    proposal = propose(pair)
    return ProposedPatch(
        file=BRIDGE_FILE,
        description=f"{proposal.description.split(' (give')[0]} (lines {lines})",
        snippet=proposal.snippet,
        diff=patch,
        path=str(target),
    )

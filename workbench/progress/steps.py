"""ninja's `[finished/total] description` and make's `[ NN%] description` progress lines.

Both parsers take one log line without its newline and return a `Step` or None. They are on the
hot path of the log pipeline, so each starts with a cheap character test and only then runs a
regular expression.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from workbench.progress.visible import clean_terminal_line

__all__ = ["clean_terminal_line"]  # re-exported: the progress package's API has it

NINJA = "ninja"
MAKE = "make"

# ninja's default NINJA_STATUS is "[%f/%t] "; common variants put more inside the brackets
# ("[%p %f/%t] ", "[%f/%t %r running] ", "[%s/%t] "). The lazy prefix takes the first
# "N/M" pair inside the first pair of brackets, so "[ 45% 12/100]" gives 12/100.
_NINJA_DEFAULT = re.compile(r"\[[^\]/]*?(\d+)/(\d+)[^\]]*\]")
# A count longer than this is no build's progress: Python refuses to convert numbers past 4300
# digits (a ValueError that killed the supervisor), and a bracket of a megabyte of digits makes
# the lazy pattern below quadratic. Both bounds keep every parse linear and raise-free.
MAX_DIGITS = 18
# ninja's status sits at the start of a line; a format's prefix is never this long.
MAX_STATUS_CHARACTERS = 256


@dataclass(frozen=True, slots=True)
class Step:
    """Progress of the inner build tool: ninja counts edges, make counts percent."""

    tool: str
    """"ninja" or "make"."""
    done: int
    """ninja: edges finished; make: percent done."""
    total: int
    """ninja: edges in this ninja run; make: 100."""
    description: str
    """What the tool printed after the counter, e.g. "Building CXX object a.cc.o"."""

    @property
    def fraction(self) -> float:
        """Done as a fraction 0.0–1.0 (0.0 when the total is not known)."""
        return self.done / self.total if self.total > 0 else 0.0


def bounded_int(text: str) -> int | None:
    """`text` as a whole number if it is 1 to MAX_DIGITS decimal digits, else None."""
    if 0 < len(text) <= MAX_DIGITS and text.isdecimal():
        return int(text)
    return None


def ninja_counts(line: str) -> tuple[int, int, str] | None:
    """(finished, total, description) of a ninja status line, else None: the tracker's hot path.

    Returns a tuple rather than a `Step` because building a frozen dataclass costs more than
    the parse itself, and most progress lines are replaced by the next one before anyone looks.
    """
    if line[:1] != "[":
        return None
    close = line.find("]", 1, MAX_STATUS_CHARACTERS)
    if close < 0:
        return None
    done_text, slash, total_text = line[1:close].partition("/")
    # The default "[%f/%t] " format needs no regex. isdecimal(), unlike isdigit(), accepts
    # only what int() reads ("²" is a digit but not a decimal).
    if slash and done_text.isdecimal() and total_text.isdecimal():
        # bounded_int's test, inline: this is most of a build's progress lines.
        if len(done_text) > MAX_DIGITS or len(total_text) > MAX_DIGITS:
            return None
        done, total = int(done_text), int(total_text)
        if done > total:
            return None
        start = close + 2 if line[close + 1 : close + 2] == " " else close + 1
        return done, total, line[start:]
    found = _NINJA_DEFAULT.match(line, 0, close + 1)
    if found is None:
        return None
    finished, of = bounded_int(found.group(1)), bounded_int(found.group(2))
    if finished is None or of is None or finished > of:
        return None
    start = close + 2 if line[close + 1 : close + 2] == " " else close + 1
    return finished, of, line[start:]


def make_percent(line: str) -> tuple[int, str] | None:
    """(percent, description) of a CMake Makefile progress line, else None (hot path)."""
    if line[:1] != "[" or line[4:6] != "%]":
        return None
    number = line[1:4].lstrip(" ")
    if not number.isdecimal():
        return None
    percent = int(number)
    if percent > 100:
        return None
    return percent, line[7:] if line[6:7] == " " else line[6:]


def parse_ninja(line: str) -> Step | None:
    """A ninja status line ("[12/345] Building CXX object ...") as a Step, else None."""
    counts = ninja_counts(line)
    return None if counts is None else Step(NINJA, *counts)


def parse_make(line: str) -> Step | None:
    """A CMake Makefile progress line ("[ 45%] Building CXX object ...") as a Step, else None."""
    found = make_percent(line)
    return None if found is None else Step(MAKE, found[0], 100, found[1])


def parse_step(line: str) -> Step | None:
    """A ninja or make progress line as a Step, else None."""
    if line[4:6] == "%]":
        return parse_make(line)
    return parse_ninja(line)


class NinjaStatusParser:
    """Parses ninja lines printed under a custom NINJA_STATUS format.

    Build it from the NINJA_STATUS value the build runs with (for example "[%p %f/%t] " or
    "%f/%t "); lines that do not start with the status are not progress lines.
    """

    def __init__(self, status_format: str) -> None:
        self.status_format = status_format
        self._pattern, self._groups = _compile_status(status_format)

    def parse(self, line: str) -> Step | None:
        """The Step a line shows, else None."""
        counts = self.counts(line)
        return None if counts is None else Step(NINJA, *counts)

    def counts(self, line: str) -> tuple[int, int, str] | None:
        """(done, total, description) of a line, else None."""
        # The status is matched within the line's start (its placeholders may backtrack over
        # what they read); the description is the rest of the line, however long.
        found = self._pattern.match(line, 0, MAX_STATUS_CHARACTERS)
        if found is None:
            return None
        values = found.groupdict()
        values.pop("description")
        description = line[found.start("description") :]
        numbers: dict[str, int] = {}
        for name, text in values.items():
            if text is not None:
                number = bounded_int(text)
                if number is None:
                    return None
                numbers[name] = number
        total = numbers.get("t")
        done = numbers.get("f")
        if done is None and "s" in numbers and "r" in numbers:
            done = numbers["s"] - numbers["r"]
        if total is None and done is not None and "u" in numbers and "s" in numbers:
            total = numbers["s"] + numbers["u"]
        if done is None or total is None:
            if "p" not in numbers:
                return None
            done, total = numbers["p"], 100
        if done > total or done < 0:
            return None
        return done, total, description


# What each NINJA_STATUS placeholder prints, as a pattern; numbers we use get a named group.
_PLACEHOLDERS = {
    "s": r"(?P<s>\d+)",
    "t": r"(?P<t>\d+)",
    "r": r"(?P<r>\d+)",
    "u": r"(?P<u>\d+)",
    "f": r"(?P<f>\d+)",
    "p": r" *(?P<p>\d+)%",
    "o": r"(?:[\d.]+|\?)",
    "c": r"(?:[\d.]+|\?)",
    "e": r"[\d.]+",
    "E": r"[\d.?]+",
    "w": r"[\d:]+",
    "W": r"[\d:?]+",
    "P": r" *\d+%",
}


def _compile_status(status_format: str) -> tuple[re.Pattern[str], tuple[str, ...]]:
    parts: list[str] = []
    groups: list[str] = []
    # ninja prints the status then the description; trailing spaces of the format may be lost
    # when a log is stripped, so they are matched loosely below.
    status_format = status_format.rstrip()
    index = 0
    while index < len(status_format):
        char = status_format[index]
        if char == "%" and index + 1 < len(status_format):
            code = status_format[index + 1]
            index += 2
            if code == "%":
                parts.append("%")
            elif code in _PLACEHOLDERS and code not in groups:
                parts.append(_PLACEHOLDERS[code])
                groups.append(code)
            else:
                # An unknown or repeated placeholder: accept whatever it printed.
                parts.append(r".*?")
            continue
        parts.append(re.escape(char))
        index += 1
    pattern = "".join(parts)
    return re.compile(pattern + r"\s*(?P<description>.*)", re.DOTALL), tuple(groups)

"""Marked regions in reference sources.

A solution file marks what students write:

    // BEGIN SOLUTION
    ...reference code...
    // STUB
    ...what the starter code has instead (optional)...
    // END SOLUTION

and, for a debugging lab, the bugs the starter code ships with:

    // BEGIN BUG name
    ...the correct code...
    // PLANTED
    ...what the starter code has instead: the bug, unannounced...
    // END BUG

`#` works in place of `//` for Python, TOML and YAML. A file that tools read as it is authored
(a pyproject.toml) cannot hold a key twice, in the solution and in its stub: there a stub line
is written commented, `#| key = "..."`, and the starter has it without the `#| `.
"""

from __future__ import annotations

import re
from typing import NamedTuple

_MARKER = re.compile(r"^\s*(?://|#)\s*(BEGIN SOLUTION|STUB|END SOLUTION|BEGIN BUG|PLANTED|END BUG)\s*(\w*)\s*$")
_COMMENTED_STUB = re.compile(r"^(\s*)#\| ?", re.MULTILINE)
_TRANSITIONS = {
    ("plain", "BEGIN SOLUTION"): "solution",
    ("solution", "STUB"): "stub",
    ("solution", "END SOLUTION"): "plain",
    ("stub", "END SOLUTION"): "plain",
    ("plain", "BEGIN BUG"): "fixed",
    ("fixed", "PLANTED"): "planted",
    ("planted", "END BUG"): "plain",
}


class RegionError(ValueError):
    pass


def _split(text: str, path: str):
    """Yield (kind, lines, bug name) blocks: kind is 'plain', 'solution', 'stub', 'fixed' or
    'planted'; the bug name is set on a bug's two blocks."""
    state, block, start, bug = "plain", [], 0, ""
    for number, line in enumerate(text.splitlines(keepends=True), 1):
        match = _MARKER.match(line)
        if not match:
            block.append(line)
            continue
        marker, name = match.groups()
        if (state, marker) not in _TRANSITIONS:
            raise RegionError(f"{path}:{number}: unexpected '{marker}' inside a {state} block")
        if marker == "BEGIN BUG" and not name:
            raise RegionError(f"{path}:{number}: a BEGIN BUG marker names its bug: // BEGIN BUG <name>")
        if name and marker != "BEGIN BUG":
            raise RegionError(f"{path}:{number}: only BEGIN BUG takes a name, not '{marker}'")
        yield state, _uncommented(block) if state == "stub" else block, bug
        state, block, start = _TRANSITIONS[(state, marker)], [], number
        bug = name if marker == "BEGIN BUG" else (bug if state == "planted" else "")
    if state != "plain":
        raise RegionError(f"{path}:{start}: {state} block is never closed")
    yield state, block, bug


def _uncommented(lines: list[str]) -> list[str]:
    """A stub's lines, those written `#| ...` without that prefix."""
    return [_COMMENTED_STUB.sub(r"\1", line, count=1) for line in lines]


def _render(text: str, path: str, keep: set[str]) -> str:
    return "".join("".join(lines) for kind, lines, _ in _split(text, path) if kind in keep)


def solution_text(text: str, path: str = "<text>") -> str:
    """The complete reference: solutions and fixed bugs kept, stubs, planted bugs and markers dropped."""
    return _render(text, path, {"plain", "solution", "fixed"})


def template_text(text: str, path: str = "<text>") -> str:
    """What students start from: each solution replaced by its stub, each bug planted."""
    return _render(text, path, {"plain", "stub", "planted"})


def bugged_text(text: str, path: str = "<text>") -> str:
    """The reference with its bugs planted: what the starter would be with every TODO written."""
    return _render(text, path, {"plain", "solution", "planted"})


def solution_lines(text: str, path: str = "<text>") -> int:
    """Lines of code the solution regions hold (blank lines and comment-only lines left out):
    what a student writes."""
    return sum(
        1
        for kind, lines, _ in _split(text, path)
        if kind == "solution"
        for line in lines
        if line.strip() and not line.strip().startswith(("//", "#"))
    )


def stubs(text: str, path: str = "<text>") -> list[str]:
    """The stub of each solution region (empty string for a region without one)."""
    found, previous = [], None
    for kind, lines, _ in _split(text, path):
        if previous == "solution":
            found.append("".join(lines) if kind == "stub" else "")
        previous = kind
    return found


class Piece(NamedTuple):
    """A stretch of a marked file: `starter` is what the template has there, `solved` what the
    solution has; `kind` is 'plain' (the two are the same), 'solution' or 'bug'."""

    kind: str
    starter: str
    solved: str


def pieces(text: str, path: str = "<text>") -> list[Piece]:
    """The file as the pieces a student edits, in order: joined, the starters make
    template_text and the solved texts solution_text."""
    found, pending = [], None  # pending: a solution or fixed block whose starter text comes next
    for kind, lines, _ in _split(text, path):
        block = "".join(lines)
        if kind in ("stub", "planted"):
            found.append(Piece("solution" if kind == "stub" else "bug", block, pending))
            pending = None
            continue
        if pending is not None:  # a solution region without a stub: the starter has nothing there
            found.append(Piece("solution", "", pending))
            pending = None
        if kind in ("solution", "fixed"):
            pending = block
        elif block:
            found.append(Piece("plain", block, block))
    return found


def planted_bugs(text: str, path: str = "<text>") -> dict[str, tuple[str, str]]:
    """{bug name: (the correct code, the planted code)} of each BUG region, in order."""
    found, fixed = {}, {}
    for kind, lines, bug in _split(text, path):
        if kind == "fixed":
            fixed[bug] = "".join(lines)
        elif kind == "planted":
            if bug in found:
                raise RegionError(f"{path}: bug {bug!r} is planted twice")
            found[bug] = (fixed[bug], "".join(lines))
    return found

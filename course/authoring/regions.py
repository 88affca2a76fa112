"""Marked regions in reference sources.

A solution file marks what students write:

    // BEGIN SOLUTION
    ...reference code...
    // STUB
    ...what the starter code has instead (optional)...
    // END SOLUTION

`#` works in place of `//` for Python.
"""
from __future__ import annotations

import re

_MARKER = re.compile(r"^\s*(?://|#)\s*(BEGIN SOLUTION|STUB|END SOLUTION)\s*$")


class RegionError(ValueError):
    pass


def _split(text: str, path: str):
    """Yield (kind, lines) blocks: kind is 'plain', 'solution' or 'stub'."""
    state, block, start = "plain", [], 0
    transitions = {
        ("plain", "BEGIN SOLUTION"): "solution",
        ("solution", "STUB"): "stub",
        ("solution", "END SOLUTION"): "plain",
        ("stub", "END SOLUTION"): "plain",
    }
    for number, line in enumerate(text.splitlines(keepends=True), 1):
        match = _MARKER.match(line)
        if not match:
            block.append(line)
            continue
        marker = match.group(1)
        if (state, marker) not in transitions:
            raise RegionError(f"{path}:{number}: unexpected '{marker}' inside a {state} block")
        yield state, block
        state, block, start = transitions[(state, marker)], [], number
    if state != "plain":
        raise RegionError(f"{path}:{start}: {state} block is never closed")
    yield state, block


def _render(text: str, path: str, keep: set[str]) -> str:
    return "".join("".join(lines) for kind, lines in _split(text, path) if kind in keep)


def solution_text(text: str, path: str = "<text>") -> str:
    """The complete reference: solutions kept, stubs and markers dropped."""
    return _render(text, path, {"plain", "solution"})


def template_text(text: str, path: str = "<text>") -> str:
    """What students start from: each solution replaced by its stub."""
    return _render(text, path, {"plain", "stub"})


def solution_lines(text: str, path: str = "<text>") -> int:
    """Lines of code the solution regions hold (blank lines and comment-only lines left out):
    what a student writes."""
    return sum(1 for kind, lines in _split(text, path) if kind == "solution" for line in lines
               if line.strip() and not line.strip().startswith(("//", "#")))


def stubs(text: str, path: str = "<text>") -> list[str]:
    """The stub of each solution region (empty string for a region without one)."""
    found, previous = [], None
    for kind, lines in _split(text, path):
        if previous == "solution":
            found.append("".join(lines) if kind == "stub" else "")
        previous = kind
    return found

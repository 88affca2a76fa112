"""A student notebook as a student who solved the unit leaves it.

Each source cell (`%%writefile_if_changed <unit>/<file>`) is filled region by region: where
the solution marks a TODO region, the stub the cell holds is replaced by the solution's code,
and a planted bug by the correct code; everything between the regions must already be the
solution's text. The filled cell must then be the unit's solution file, character for
character: a notebook whose template drifted from its solution is refused, not run. The
submit cell's STUDENT is set to an id.
"""

from __future__ import annotations

import os
import re

import nbformat

from course.notebook import SOURCE_MAGIC
from course.spec import regions
from course.spec.regions import Piece
from course.spec.units import Unit

_STUDENT = re.compile(r'^STUDENT = ""', re.MULTILINE)


class TemplateDrift(ValueError):
    """The notebook's starter code is not the template of the unit's solution."""


def solved(notebook: nbformat.NotebookNode, unit: Unit, student: str) -> nbformat.NotebookNode:
    """A copy of the student `notebook` of `unit` with every source cell solved and STUDENT set."""
    if not student.strip():
        raise ValueError("student: expected an id for the submit cell's STUDENT, got an empty one")
    notebook = nbformat.from_dict(notebook)
    filled, students = [], 0
    for cell in notebook.cells:
        if cell.cell_type != "code":
            continue
        file = source_file(cell.source, unit)
        if file is not None:
            header, _, text = cell.source.partition("\n")
            cell.source = f"{header}\n{solved_source(unit, file, text)}"
            filled.append(file)
        cell.source, count = _STUDENT.subn(f"STUDENT = {student!r}", cell.source)
        students += count
    missing = [file for file in unit.files if file not in filled]
    if missing:
        raise TemplateDrift(f"{unit.name}: the notebook has no source cell for {', '.join(missing)}")
    if students != 1:
        raise TemplateDrift(f'{unit.name}: expected one submit cell with STUDENT = "", found {students}')
    return notebook


def source_file(source: str, unit: Unit) -> str | None:
    """The unit's file a `%%writefile_if_changed <unit>/<file>` cell writes; None for other cells."""
    header = source.partition("\n")[0].split()
    if len(header) != 2 or header[0] != SOURCE_MAGIC:
        return None
    owner, _, file = header[1].partition("/")
    if owner != unit.name or file not in unit.files:
        raise TemplateDrift(
            f"{unit.name}: a source cell writes {header[1]}, which is none of the unit's files "
            f"({', '.join(unit.files)})"
        )
    return file


def solved_source(unit: Unit, file: str, text: str) -> str:
    """`text`, the starter code of `file` as a source cell holds it, with each region solved."""
    where = os.path.relpath(unit.solution_path(file), unit.repo)
    done, at, region = [], 0, 0
    for piece in _pieces(unit, file):
        region += piece.kind != "plain"
        if not text.startswith(piece.starter, at):
            raise TemplateDrift(_drift(unit, file, where, text, at, piece, region))
        done.append(piece.solved)
        at += len(piece.starter)
    if at != len(text):
        raise TemplateDrift(
            f"{unit.name}/{file}: the notebook's cell goes on past the end of {where}'s template, "
            f"at line {_line(text, at)}: {_quote(text, at)}; {_AGAIN}"
        )
    result = "".join(done)
    if result != unit.solution(file):  # the pieces are the solution's own: a mismatch is a bug here
        raise TemplateDrift(f"{unit.name}/{file}: the solved cell is not {where}'s solution text")
    return result


_AGAIN = "the notebook was made from another version of the solution: make the release again"


def _pieces(unit: Unit, file: str) -> list[Piece]:
    if file in unit.given_files:  # handed over solved: nothing to fill
        return [Piece("plain", unit.solution(file), unit.solution(file))]
    return regions.pieces(unit.raw(file), unit.solution_path(file))


def _drift(unit: Unit, file: str, where: str, text: str, at: int, piece: Piece, region: int) -> str:
    """Where the cell first differs from `piece`'s starter text, which should begin at `at`."""
    place = {"solution": f"in TODO region {region}", "bug": f"in planted bug region {region}"}.get(
        piece.kind, "outside the TODO regions"
    )
    same = len(os.path.commonprefix([text[at : at + len(piece.starter)], piece.starter]))
    line_start = piece.starter.rfind("\n", 0, same) + 1  # the differing line, from its start
    expected = piece.starter[line_start:].partition("\n")[0]
    found = at + line_start
    return (
        f"{unit.name}/{file}: the notebook's cell differs from {where}'s template at its line "
        f"{_line(text, found)} ({place}): expected {expected!r}, found {_quote(text, found)}; {_AGAIN}"
    )


def _line(text: str, at: int) -> int:
    """The cell's line number of `at` (the cell's first line is the %%writefile_if_changed one)."""
    return text.count("\n", 0, at) + 2


def _quote(text: str, at: int) -> str:
    return repr(text[at:].partition("\n")[0]) if at < len(text) else "the end of the cell"

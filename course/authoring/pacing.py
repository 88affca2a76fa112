"""The instructor kit's pacing guide for a unit: its lesson's sections, what a student does in
each (prose to read, lines of solution to write, questions to answer), an estimate of the
time each takes, and the units it builds on. Generated with the notebooks, so it follows the
lesson and the marked regions as they change.

The estimate is a model, not a measurement: READING_WORDS_A_MINUTE of prose, MINUTES_A_LINE
for each line a solution region holds, MINUTES_A_QUESTION for each written answer. Builds,
test runs and benchmarks are left out: they depend on the GPU.
"""

from __future__ import annotations

import math
import os
import re

from course.spec.lesson import lesson_parts
from course.spec.regions import solution_lines
from course.spec.units import Unit, all_units

READING_WORDS_A_MINUTE = 150
MINUTES_A_LINE = 1.5
MINUTES_A_QUESTION = 5
_HEADING = re.compile(r"^## (.+?)\s*$")


def pacing_path(unit: Unit) -> str:
    return os.path.join(unit.repo, "docs", "instructor", f"{unit.name}_pacing.md")


def sections(unit: Unit) -> list[dict]:
    """The lesson's `## ` sections in order: title, words of prose, the files whose regions the
    student writes there, lines to write, questions and code cells."""
    found: list[dict] = []
    for part in lesson_parts(unit):
        heading = _HEADING.match(part.text) if part.kind == "prose" else None
        if heading:
            found.append(dict(title=heading.group(1), words=0, files=[], lines=0, questions=0, cells=0))
            continue
        if not found:
            continue  # the title and the runtime cell come before the first section
        section = found[-1]
        if part.kind == "code":
            section["cells"] += 1
        elif part.kind == "directive":
            if part.name == "source" and part.text in unit.sources:
                written = solution_lines(unit.raw(part.text), part.text)
                if written:
                    section["files"].append(part.text)
                    section["lines"] += written
            elif part.name == "answer":
                section["questions"] += 1
        else:
            section["words"] += len(part.text.split())
    return found


def minutes(section: dict) -> int:
    estimate = (
        section["words"] / READING_WORDS_A_MINUTE
        + section["lines"] * MINUTES_A_LINE
        + section["questions"] * MINUTES_A_QUESTION
    )
    return max(1, math.ceil(estimate)) if estimate else 0


def pacing_text(unit: Unit) -> str:
    """The unit's pacing guide as markdown."""
    rows = sections(unit)
    names = [other.name for other in all_units(unit.repo)]
    position = names.index(unit.name)
    before = names[position - 1] if position else ""
    given = sorted({from_unit for _, from_unit in unit.given})
    lines = [
        f"# {unit.title}: pacing guide",
        "",
        f"Generated from `solutions/{unit.name}/lesson.md` and the marked regions of its sources (run "
        "`python -m course.authoring.generate`). The minutes are an estimate from a model, not timed with "
        f"students: {READING_WORDS_A_MINUTE} words of prose a minute, {MINUTES_A_LINE:g} minutes a line of "
        f"solution, {MINUTES_A_QUESTION} minutes a written answer. Builds, test runs and benchmarks come on "
        "top and depend on the GPU. Recalibrate after a first class.",
        "",
    ]
    lines.append(f"**Comes after:** `{before}`." if before else "**Comes after:** nothing: it opens the course.")
    if given:
        lines.append(
            "**Handed over solved from:** "
            + ", ".join(f"`{name}`" for name in given)
            + " (those files arrive finished, so a student who missed those days can start here)."
        )
    lines.append("")
    lines += ["| section | prose (words) | to write | questions | code cells | minutes |", "|---|---|---|---|---|---|"]
    for row in rows:
        written = f"{row['lines']} lines in {', '.join(f'`{f}`' for f in row['files'])}" if row["lines"] else "-"
        lines.append(
            f"| {row['title']} | {row['words']} | {written} | {row['questions'] or '-'} | "
            f"{row['cells'] or '-'} | {minutes(row)} |"
        )
    total = sum(minutes(row) for row in rows)
    lines += ["", f"**Total:** about {total} minutes ({total / 60:.1f} hours) before builds and runs.", ""]
    return "\n".join(lines)

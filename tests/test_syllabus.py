"""docs/syllabus.md's schedule and weights are the units' own: the units in course order with
their pacing guides, and each unit's points split as its suites split them. A suite or a unit
that changes fails this test, with the table to paste in its place."""

import os

from course.spec import units
from course.spec.questions import questions

SYLLABUS = os.path.join(units.REPO, "docs", "syllabus.md")
UNITS = [unit for unit in units.all_units() if unit.has_tests()]


def _read_syllabus() -> str:
    with open(SYLLABUS, encoding="utf-8") as handle:
        return handle.read()


def schedule_table() -> str:
    lines = ["| day | unit | pacing guide |", "| --- | --- | --- |"]
    for unit in units.all_units():
        guide = f"[{unit.name}_pacing.md](instructor/{unit.name}_pacing.md)"
        lines.append(f"| {unit.day} | {unit.title.split(': ', 1)[-1]} (`{unit.name}`) | {guide} |")
    return "\n".join(lines)


def points_by_kind(unit: units.Unit) -> dict[str, float]:
    """A unit's points: correctness cases its notebook also runs (public), those only the grader
    runs (hidden), and every timed case (perf), public or not."""
    public = {case.name for case in unit.tests(hidden=False).CASES}
    split = {"public": 0.0, "hidden": 0.0, "perf": 0.0}
    for case in unit.tests(hidden=True).CASES:
        kind = "perf" if case.kind == "perf" else "public" if case.name in public else "hidden"
        split[kind] += case.points
    return split


def _row(name: str, split: dict[str, float], written: int) -> str:
    total = sum(split.values())
    cells = [f"{split[kind]:g} ({split[kind] / total:.0%})" for kind in ("public", "hidden", "perf")]
    return f"| {name} | {' | '.join(cells)} | {total:g} | {written} |"


def weights_table() -> str:
    lines = [
        "| unit | public | hidden | perf | autograded | written questions |",
        "| --- | --- | --- | --- | --- | --- |",
    ]
    course = {"public": 0.0, "hidden": 0.0, "perf": 0.0}
    asked = 0
    for unit in UNITS:
        split, written = points_by_kind(unit), len(questions(unit))
        lines.append(_row(unit.name, split, written))
        course = {kind: course[kind] + split[kind] for kind in course}
        asked += written
    lines.append(_row("all units", course, asked))
    return "\n".join(lines)


def test_the_schedule_lists_every_unit_in_course_order_with_its_pacing_guide():
    expected = schedule_table()
    assert expected in _read_syllabus(), f"docs/syllabus.md: replace the schedule's table with\n{expected}"
    for unit in units.all_units():
        assert os.path.exists(os.path.join(units.REPO, "docs", "instructor", f"{unit.name}_pacing.md")), unit.name


def test_the_weights_are_the_suites_points():
    expected = weights_table()
    assert expected in _read_syllabus(), f"docs/syllabus.md: replace the weights' table with\n{expected}"

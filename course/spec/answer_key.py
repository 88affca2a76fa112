"""A unit's answer key, solutions/<unit>/answers.md: under each question's heading (`## q1`), a
model answer, then its points and the rubric they come from, as the instructor reads them:

    Points: 3

    Rubric:
    - 1 point: the caster unwraps the Python tensor into its `at::Tensor`.
    - 2 points: no data is copied (a continuation line is indented).

The items' points add up to the question's. The grader gives each written answer its question's
points (autograder/stages/answers.py), to be filled in by hand (autograder/written_scores.py).
The key itself stays off the machines students' code runs on; the Gradescope zip carries only
the points (POINTS_FILE)."""

from __future__ import annotations

import json
import math
import os
import re
from dataclasses import dataclass

from course.spec.questions import questions
from course.spec.units import Unit

KEY_FILE = "answers.md"
POINTS_FILE = "written_points.json"  # {question: points}: what a copy without the key carries
_SECTION = re.compile(r"^## (\S+)[ \t]*\n(.*?)(?=^## |\Z)", re.MULTILINE | re.DOTALL)
_POINTS = re.compile(r"^Points:[ \t]*(\S*)[ \t]*$", re.MULTILINE)
_ITEM = re.compile(r"^- (\S+) points?: (.+)$")


class AnswerKeyError(ValueError):
    """An answer key that does not give a question its points and rubric."""


@dataclass(frozen=True)
class RubricItem:
    points: float
    text: str


@dataclass(frozen=True)
class Marking:
    """What a question is worth, and what earns it."""

    question: str
    points: float
    rubric: tuple[RubricItem, ...]


def _number(text: str, where: str) -> float:
    try:
        value = float(text)
    except ValueError:
        value = math.nan
    if not (math.isfinite(value) and value > 0):
        raise AnswerKeyError(f"{where}: {text!r} is not a number of points above 0")
    return value


def _rubric(text: str, where: str) -> tuple[RubricItem, ...]:
    """The bullets after `Rubric:`, each `- N point(s): text`, continued by indented lines."""
    _, found, after = text.partition("\nRubric:\n")
    if not found:
        raise AnswerKeyError(f"{where}: no `Rubric:` line followed by its items, such as `- 1 point: ...`")
    items: list[list] = []
    for line in after.splitlines():
        if line.startswith("- "):
            match = _ITEM.match(line)
            if not match:
                raise AnswerKeyError(f"{where}: rubric item {line[:60]!r}: expected `- N point(s): what earns them`")
            items.append([_number(match[1], f"{where}: rubric item {line[:40]!r}"), match[2]])
        elif line.startswith("  ") and items:
            items[-1][1] += " " + line.strip()
        elif line.strip() or items:
            break
    if not items:
        raise AnswerKeyError(f"{where}: `Rubric:` has no items, such as `- 1 point: ...`")
    return tuple(RubricItem(points, text) for points, text in items)


def parse(text: str, where: str) -> dict[str, Marking]:
    """Each question's marking in an answer key's text; `where` names it in errors (unit and file)."""
    markings = {}
    for question, body in _SECTION.findall(text):
        here = f"{where}, question {question}"
        found = _POINTS.findall(body)
        if len(found) != 1:
            raise AnswerKeyError(f"{here}: expected one `Points: N` line under its heading, found {len(found)}")
        points, rubric = _number(found[0], f"{here}: Points"), _rubric(body, here)
        if not math.isclose(points, sum(item.points for item in rubric)):
            raise AnswerKeyError(
                f"{here}: Points: {points:g}, but its rubric's items add up to {sum(i.points for i in rubric):g}"
            )
        markings[question] = Marking(question, points, rubric)
    return markings


def answer_key(unit: Unit) -> dict[str, Marking]:
    """The unit's answers.md read; {} where it has none (a copy without the key)."""
    path = os.path.join(unit.folder, KEY_FILE)
    if not os.path.exists(path):
        return {}
    with open(path, encoding="utf-8") as handle:
        return parse(handle.read(), f"{unit.name} {KEY_FILE}")


def points(unit: Unit) -> dict[str, float]:
    """The points of each question the lesson asks: from the key, else from the points file a
    copy without the key carries. A question neither gives points to is an error naming it."""
    asked = [question.id for question in questions(unit)]
    key = answer_key(unit)
    found = {q: m.points for q, m in key.items()} if key else _points_file(unit)
    missing = [question for question in asked if question not in found]
    if missing:
        raise AnswerKeyError(
            f"{unit.name} {KEY_FILE}: question {missing[0]} has no points; expected a `## {missing[0]}` "
            f"section with a `Points: N` line and its rubric"
        )
    return {question: found[question] for question in asked}


def points_json(unit: Unit) -> str:
    """POINTS_FILE's text for a copy of the unit that leaves the key out."""
    return json.dumps(points(unit), indent=2, sort_keys=True) + "\n"


def _points_file(unit: Unit) -> dict[str, float]:
    path = os.path.join(unit.folder, POINTS_FILE)
    if not os.path.exists(path):
        return {}
    with open(path, encoding="utf-8") as handle:
        found = json.load(handle)
    return {str(q): float(p) for q, p in found.items()} if isinstance(found, dict) else {}

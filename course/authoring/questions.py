"""A unit's written questions, read from its lesson: each `<!-- answer ID -->` and the
paragraph just above it, which asks the question. The grader turns a submission's answers
into entries for grading by hand (autograder/grade.py), and the class reports collect them
(autograder/gradebook.py)."""
from __future__ import annotations

import os
from dataclasses import dataclass

from course.authoring.generate import ANSWER_PROMPT, DIRECTIVE
from course.authoring.units import Unit

MAX_ANSWER_CHARS = 8000  # of one answer, in results.json
WRITTEN = "written"  # the tag of the answers' entries in results.json


@dataclass(frozen=True)
class Question:
    id: str
    text: str


def questions(unit: Unit) -> list[Question]:
    if not os.path.exists(os.path.join(unit.folder, "lesson.md")):
        return []
    found, paragraph, current = [], [], []  # the last paragraph done, the one being read
    for line in unit.raw("lesson.md").splitlines():
        directive = DIRECTIVE.match(line)
        if directive and directive.group(1) == "answer":
            found.append(Question(directive.group(2), " ".join(current or paragraph)))
            paragraph, current = [], []
        elif line.strip():
            current.append(line.strip())
        elif current:
            paragraph, current = current, []
    return found


def answer_text(cell_text: str) -> str:
    """What the student wrote in an answer cell, without the prompt the cell came with."""
    text = cell_text.strip()
    if text.startswith(ANSWER_PROMPT):
        text = text[len(ANSWER_PROMPT):].strip()
    return text

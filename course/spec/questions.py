"""A unit's written questions, read from its lesson: each `<!-- answer ID -->` and the
paragraph just above it, which asks the question. The grader turns a submission's answers
into entries for grading by hand (autograder/grade.py), and the class reports collect them
(autograder/gradebook.py)."""

from __future__ import annotations

from dataclasses import dataclass

from course.spec.lesson import ANSWER_PROMPT, has_lesson, lesson_parts
from course.spec.units import Unit

MAX_ANSWER_CHARS = 8000  # of one answer, in results.json
WRITTEN = "written"  # the tag of the answers' entries in results.json
PENDING = "pending hand grading"  # an answer's status until the instructor's score is folded in


@dataclass(frozen=True)
class Question:
    id: str
    text: str


def questions(unit: Unit) -> list[Question]:
    if not has_lesson(unit):
        return []
    found, paragraph, current = [], [], []  # the last paragraph done, the one being read
    for part in lesson_parts(unit):
        if part.kind == "directive" and part.name == "answer":
            found.append(Question(part.text, " ".join(current or paragraph)))
            paragraph, current = [], []
        elif part.kind == "prose" and part.text.strip():
            current.append(part.text.strip())
        elif current:  # a blank line, a code block or another directive ends a paragraph
            paragraph, current = current, []
    return found


def answer_text(cell_text: str) -> str:
    """What the student wrote in an answer cell, without the prompt the cell came with."""
    text = cell_text.strip()
    if text.startswith(ANSWER_PROMPT):
        text = text[len(ANSWER_PROMPT) :].strip()
    return text

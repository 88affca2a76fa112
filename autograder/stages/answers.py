"""A notebook's written answers: kept from the submission as it is read, and reported as
entries for grading by hand."""

from __future__ import annotations

from autograder.results import TestResult
from course.spec.answer_key import points
from course.spec.questions import MAX_ANSWER_CHARS, WRITTEN, answer_text, questions
from course.spec.units import Unit


def kept_answers(unit: Unit, answers: dict[str, str]) -> dict[str, str]:
    """The answers to the unit's own questions, each cut to MAX_ANSWER_CHARS: what the report
    carries of a notebook's answer cells, whatever their number and size."""
    known = {question.id for question in questions(unit)}
    return {key: answer_text(text)[:MAX_ANSWER_CHARS] for key, text in answers.items() if key in known}


def written_entries(unit: Unit, answers: dict[str, str]) -> list[TestResult]:
    """One entry per question of the lesson, for grading by hand, when the submission is a
    notebook (it carries answer cells): out of the question's points (its answer key), scored 0
    and pending until the instructor's score is folded in (autograder/written_scores.py). An
    empty answer is a failed entry: there is nothing to grade."""
    if not answers:
        return []
    entries, worth = [], points(unit)
    for question in questions(unit):
        text = answer_text(answers.get(question.id, ""))
        entries.append(
            TestResult(
                f"written_{question.id}",
                worth[question.id],
                bool(text),
                text[:MAX_ANSWER_CHARS] if text else "no answer to grade: " + question.text,
                visibility="visible",
                tags=(WRITTEN, "manual"),
                fraction=0.0,
                pending=bool(text),
            )
        )
    return entries

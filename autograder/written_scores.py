"""answers.csv: the written answers of a class, a row per submission and question, with the
question's points and a `score` cell the instructor fills in. The reports read the scores back
(every `grade-all` and `merge`), fold them into each submission's total and write the file again
with them kept, so grading by hand and grading again can happen in any order.

A score cell is empty (not graded yet) or a number from 0 to the question's points; anything
else stops the reports with the file, the row and the column named."""

from __future__ import annotations

import csv
import math
import os

from course.spec.questions import WRITTEN

ANSWERS = "answers.csv"
COLUMNS = ["Name", "SID", "Email", "Submission", "Question", "Points", "Answer", "score"]
SCORE = "score"


class ScoreError(ValueError):
    """A score in answers.csv that cannot be folded in."""


def written_tests(results: dict | None) -> list[dict]:
    """A results.json's written answers (tagged `written`)."""
    return [t for t in (results or {}).get("tests", ()) if t.get("tags", [None])[0] == WRITTEN]


def read_scores(path: str, worth: dict[tuple[str, str], float]) -> dict[tuple[str, str], float]:
    """{(submission, question): score} of the filled-in score cells of answers.csv at `path`.
    `worth`: each (submission, question) the class has now, and its points; a row of a hand-in
    or question no longer there is left out. No file, or one without a score column (written
    before there was one): no scores."""
    if not os.path.exists(path):
        return {}
    try:
        with open(path, newline="", encoding="utf-8-sig") as handle:  # a spreadsheet may add a BOM
            return _scores(csv.DictReader(handle), path, worth)
    except (OSError, UnicodeDecodeError, csv.Error) as error:
        raise ScoreError(f"{path}: expected a readable UTF-8 CSV file ({type(error).__name__}: {error})") from None


def _scores(reader: csv.DictReader, path: str, worth: dict) -> dict[tuple[str, str], float]:
    if SCORE not in (reader.fieldnames or ()):
        return {}
    missing = [c for c in ("Submission", "Question") if c not in reader.fieldnames]
    if missing:
        raise ScoreError(f"{path}: no {' or '.join(missing)} column; expected the columns {', '.join(COLUMNS)}")
    scores = {}
    for number, row in enumerate(reader, start=2):  # a spreadsheet's row: an answer's lines are one
        cell, key = (row.get(SCORE) or "").strip(), (row["Submission"], row["Question"])
        if cell and key in worth:
            scores[key] = _score(cell, worth[key], f"{path}: row {number}, column {SCORE}")
    return scores


def _score(cell: str, points: float, where: str) -> float:
    try:
        value = float(cell)
    except ValueError:
        value = math.nan
    if not (math.isfinite(value) and 0 <= value <= points + 1e-9):
        raise ScoreError(f"{where}: {cell[:40]!r}; expected a number from 0 to {points:g} (the question's points)")
    return value


def answer_rows(rows: list[tuple[list[dict], str, dict | None]], scores: dict) -> list[list[str]]:
    """answers.csv's rows after COLUMNS: for each (students, submission id, results) a row per
    written answer, with its score where one was given."""
    found = []
    for students, submission, results in rows:
        who = ["; ".join(s.get(key, "") for s in students if s.get(key)) for key in ("name", "sid", "email")]
        for test in written_tests(results):
            answer = test["output"] if test["status"] == "passed" else ""
            score = scores.get((submission, test["name"]))
            found.append(
                who
                + [submission, test["name"], f"{test['max_score']:g}", answer]
                + ["" if score is None else f"{score:g}"]
            )
    return found

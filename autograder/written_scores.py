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
    with open(path, newline="", encoding="utf-8-sig") as handle:  # a spreadsheet may add a BOM
        reader = csv.DictReader(handle)
        if SCORE not in (reader.fieldnames or ()):
            return {}
        missing = [c for c in ("Submission", "Question") if c not in reader.fieldnames]
        if missing:
            raise ScoreError(f"{path}: no {' or '.join(missing)} column; expected the columns {', '.join(COLUMNS)}")
        scores = {}
        for row in reader:
            cell, key = (row.get(SCORE) or "").strip(), (row["Submission"], row["Question"])
            if cell and key in worth:
                scores[key] = _score(cell, worth[key], f"{path}: row {reader.line_num}, column {SCORE}")
    return scores


def _score(cell: str, points: float, where: str) -> float:
    try:
        value = float(cell)
    except ValueError:
        value = math.nan
    if not (math.isfinite(value) and 0 <= value <= points + 1e-9):
        raise ScoreError(f"{where}: {cell[:40]!r}; expected a number from 0 to {points:g} (the question's points)")
    return value


def write_answers(rows: list[tuple[list[dict], str, dict | None]], path: str, scores: dict, opened) -> None:
    """answers.csv: for each (students, submission id, results) a row per written answer, with
    its score where one was given. `opened(path)`: the report writer's whole-or-nothing file."""
    with opened(path) as handle:
        writer = csv.writer(handle)
        writer.writerow(COLUMNS)
        for students, submission, results in rows:
            who = ["; ".join(s.get(key, "") for s in students if s.get(key)) for key in ("name", "sid", "email")]
            for test in written_tests(results):
                answer = test["output"] if test["status"] == "passed" else ""
                score = scores.get((submission, test["name"]))
                writer.writerow(
                    who
                    + [submission, test["name"], f"{test['max_score']:g}", answer]
                    + ["" if score is None else f"{score:g}"]
                )

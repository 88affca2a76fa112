"""Written answers: read from the lesson's questions, carried by a notebook submission, and
handed to the instructor for grading by hand. No build, no child process."""

import csv

import pytest

from autograder import gradebook, report
from autograder.results import Grade
from autograder.stages.answers import kept_answers, written_entries
from course.authoring.generate import ANSWER_PROMPT
from course.spec import units
from course.spec.questions import MAX_ANSWER_CHARS, WRITTEN, questions

UNITS = units.all_units()


@pytest.mark.parametrize("unit", UNITS, ids=lambda u: u.name)
def test_every_question_is_found_with_its_text(unit):
    found = questions(unit)
    assert found, f"{unit.name}: no <!-- answer --> in the lesson"
    assert len({q.id for q in found}) == len(found), "two questions share an id"
    assert all(q.text.startswith(("**Q", "**D")) for q in found), [q.text[:40] for q in found]  # D: a diagnosis


def test_answers_become_entries_worth_nothing_until_graded_by_hand():
    unit = units.load("day06_bias_gelu")
    ids = [q.id for q in questions(unit)]
    answers = {ids[0]: f"{ANSWER_PROMPT} 2.1 TB/s, because", ids[1]: f"{ANSWER_PROMPT}\n\n"}
    entries = {e.name: e for e in written_entries(unit, answers)}
    assert list(entries) == [f"written_{i}" for i in ids]
    first, second = entries[f"written_{ids[0]}"], entries[f"written_{ids[1]}"]
    assert first.passed and first.output == "2.1 TB/s, because" and first.max_score == 0
    assert not second.passed and second.output.startswith("no answer to grade: **Q2")
    assert all(e.tags[0] == WRITTEN for e in entries.values())
    assert written_entries(unit, {}) == [], "a submission of sources alone has no answers to grade"


def test_the_report_keeps_only_answers_to_the_units_questions_each_cut_short():
    unit = units.load("day06_bias_gelu")
    ids = [q.id for q in questions(unit)]
    answers = {
        ids[0]: f"{ANSWER_PROMPT} " + "x" * (40 << 20),
        "not_a_question": "y" * 100,
        **{f"extra_{i}": "z" for i in range(1000)},
    }
    kept = kept_answers(unit, answers)
    assert list(kept) == [ids[0]] and kept[ids[0]] == "x" * MAX_ANSWER_CHARS


def test_the_class_reports_collect_answers_apart_from_the_score(tmp_path):
    unit = units.load("day06_bias_gelu")
    ids = [q.id for q in questions(unit)]
    out = tmp_path / "out"
    for who, answers in {"alice": {ids[0]: "fast"}, "bob": {}}.items():
        folder = out / gradebook.RESULTS / who
        report.write(Grade(unit.name, tests=written_entries(unit, answers or {"none": ""})), str(folder))
        (folder / gradebook.STATE).write_text(f'{{"status": "graded", "students": [{{"name": "{who}"}}]}}')
    gradebook.write_reports(str(out), unit.name)
    with open(out / "answers.csv", newline="") as handle:
        rows = {row["Name"]: row for row in csv.DictReader(handle)}
    assert rows["alice"][f"written_{ids[0]}"] == "fast" and rows["bob"][f"written_{ids[0]}"] == ""
    with open(out / "gradebook.csv", newline="") as handle:
        book = {row["Name"]: row for row in csv.DictReader(handle)}
    assert book["alice"]["Written answers"] == f"1 of {len(ids)}" and book["alice"]["Total Score"] == "0"
    assert WRITTEN not in book["alice"] and "written_" not in (out / "failures.md").read_text()

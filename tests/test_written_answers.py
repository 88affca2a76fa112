"""Written answers: read from the lesson's questions, carried by a notebook submission, handed
to the instructor for grading by hand out of their points, and their scores folded back into
the totals. No build, no child process."""

import csv
import json

import pytest

from autograder import gradebook, report
from autograder.__main__ import main
from autograder.results import Grade
from autograder.stages.answers import kept_answers, written_entries
from autograder.submission import read_submission
from autograder.written_scores import ANSWERS
from course import notebook
from course.authoring.generate import ANSWER_PROMPT
from course.spec import answer_key, units
from course.spec.questions import MAX_ANSWER_CHARS, PENDING, WRITTEN, questions

UNITS = units.all_units()


@pytest.mark.parametrize("unit", UNITS, ids=lambda u: u.name)
def test_every_question_is_found_with_its_text(unit):
    found = questions(unit)
    assert found, f"{unit.name}: no <!-- answer --> in the lesson"
    assert len({q.id for q in found}) == len(found), "two questions share an id"
    assert all(q.text.startswith(("**Q", "**D")) for q in found), [q.text[:40] for q in found]  # D: a diagnosis


def test_answers_become_entries_out_of_their_points_pending_hand_grading():
    unit = units.load("day06_bias_gelu")
    ids = [q.id for q in questions(unit)]
    worth = answer_key.points(unit)
    answers = {ids[0]: f"{ANSWER_PROMPT} 2.1 TB/s, because", ids[1]: f"{ANSWER_PROMPT}\n\n"}
    entries = {e.name: e for e in written_entries(unit, answers)}
    assert list(entries) == [f"written_{i}" for i in ids]
    first, second = entries[f"written_{ids[0]}"], entries[f"written_{ids[1]}"]
    assert first.passed and first.pending and first.output == "2.1 TB/s, because"
    assert (first.score, first.max_score) == (0, worth[ids[0]]) and worth[ids[0]] > 0
    assert not second.passed and not second.pending and second.output.startswith("no answer to grade: **Q2")
    assert all(e.tags[0] == WRITTEN for e in entries.values())
    assert written_entries(unit, {}) == [], "a submission of sources alone has no answers to grade"
    data = report.results_json(Grade(unit.name, tests=list(entries.values())))
    pending = data["tests"][0]
    assert (pending["status"], pending["extra_data"], pending["max_score"]) == ("passed", {"status": PENDING}, 3)
    assert data["score"] == 0 and "extra_data" not in data["tests"][1]
    assert "PENDING" in report.table(Grade(unit.name, tests=list(entries.values())))
    assert f"written_{ids[0]}: {PENDING.upper()} (0/3)" in gradebook.feedback_text(data)


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


def _graded_class(tmp_path, unit, answered: dict[str, dict]):
    """OUT with a graded notebook submission per student, with these answers, as batch.Grading leaves it."""
    out = tmp_path / "out"
    for who, answers in answered.items():
        folder = out / gradebook.RESULTS / who
        report.write(Grade(unit.name, tests=written_entries(unit, answers or {"none": ""})), str(folder))
        (folder / gradebook.STATE).write_text(f'{{"status": "graded", "students": [{{"name": "{who}"}}]}}')
    return out


def _csv(path) -> list[dict]:
    with open(path, newline="", encoding="utf-8") as handle:
        return list(csv.DictReader(handle))


def test_the_class_reports_collect_answers_apart_from_the_score(tmp_path):
    unit = units.load("day06_bias_gelu")
    ids = [q.id for q in questions(unit)]
    out = _graded_class(tmp_path, unit, {"alice": {ids[0]: "fast"}, "bob": {}})
    gradebook.write_reports(str(out), unit.name)
    rows = {(row["Name"], row["Question"]): row for row in _csv(out / ANSWERS)}
    assert len(rows) == 2 * len(ids) and rows["alice", f"written_{ids[0]}"]["Answer"] == "fast"
    assert rows["bob", f"written_{ids[0]}"]["Answer"] == "" and rows["bob", f"written_{ids[0]}"]["score"] == ""
    assert rows["alice", f"written_{ids[0]}"]["Points"] == f"{answer_key.points(unit)[ids[0]]:g}"
    book = {row["Name"]: row for row in _csv(out / "gradebook.csv")}
    assert book["alice"]["Written answers"] == f"1 of {len(ids)}" and book["alice"]["Total Score"] == "0"
    assert book["alice"][WRITTEN] == "0" and "written_" not in (out / "failures.md").read_text()


def _score(out, who: str, question: str, score: str) -> None:
    """An instructor's score typed into answers.csv."""
    rows = _csv(out / ANSWERS)
    for row in rows:
        if (row["Submission"], row["Question"]) == (who, question):
            row["score"] = score
    with open(out / ANSWERS, "w", newline="", encoding="utf-8") as handle:
        writer = csv.DictWriter(handle, fieldnames=list(rows[0]))
        writer.writeheader()
        writer.writerows(rows)


def test_merge_folds_the_scores_given_by_hand_into_the_totals_and_keeps_them(tmp_path):
    unit = units.load("day06_bias_gelu")
    ids = [q.id for q in questions(unit)]
    out = _graded_class(tmp_path, unit, {"alice": {ids[0]: "fast", ids[1]: "slow"}, "bob": {ids[0]: "?"}})
    gradebook.write_reports(str(out), unit.name)
    _score(out, "alice", f"written_{ids[0]}", "2.5")
    _score(out, "alice", f"written_{ids[1]}", "1")
    _score(out, "bob", f"written_{ids[0]}", "0")
    assert main(["merge", str(out), "--unit", unit.name]) == 0
    book = {row["Name"]: row for row in _csv(out / "gradebook.csv")}
    assert (book["alice"]["Total Score"], book["alice"][WRITTEN]) == ("3.5", "3.5")
    assert (book["bob"]["Total Score"], book["bob"][WRITTEN]) == ("0", "0")
    kept = {(r["Submission"], r["Question"]): r["score"] for r in _csv(out / ANSWERS)}
    assert kept["alice", f"written_{ids[0]}"] == "2.5" and kept["alice", f"written_{ids[2]}"] == ""
    gradebook.write_reports(str(out), unit.name)  # grading again keeps what was given by hand
    assert {(r["Submission"], r["Question"]): r["score"] for r in _csv(out / ANSWERS)} == kept


@pytest.mark.parametrize("score", ["3.5", "-1", "two", "nan"])
def test_a_score_outside_the_questions_points_is_named_by_file_row_and_column(tmp_path, capsys, score):
    unit = units.load("day06_bias_gelu")
    ids = [q.id for q in questions(unit)]
    out = _graded_class(tmp_path, unit, {"alice": {ids[0]: "fast,\nbecause", ids[1]: "so"}})
    gradebook.write_reports(str(out), unit.name)
    before = (out / "gradebook.csv").read_text()
    _score(out, "alice", f"written_{ids[1]}", score)
    assert main(["merge", str(out), "--unit", unit.name]) == 2
    err = capsys.readouterr().err  # row 3: the first answer's two lines are one row
    assert f"{out / ANSWERS}: row 3, column score: {score!r}; expected a number from 0 to 3" in err, err
    assert (out / "gradebook.csv").read_text() == before, "the reports stay as they were"


def test_an_answers_csv_that_is_not_text_is_named(tmp_path, capsys):
    unit = units.load("day06_bias_gelu")
    out = _graded_class(tmp_path, unit, {"alice": {questions(unit)[0].id: "fast"}})
    (out / ANSWERS).write_bytes(b"Submission,Question,score\n\xff\xfe,\n")
    assert main(["merge", str(out), "--unit", unit.name]) == 2
    assert f"{out / ANSWERS}: expected a readable UTF-8 CSV file" in capsys.readouterr().err


def _student_notebook_with_an_answer(folder, unit, text: str) -> str:
    """The unit's student notebook saved in `folder` with its first question answered."""
    notebook = json.loads(open(f"notebooks/{unit.name}.ipynb").read())
    cell = next(c for c in notebook["cells"] if c.get("metadata", {}).get("course", {}).get("answer"))
    cell["source"] = f"{ANSWER_PROMPT}\n\n{text}"
    path = folder / f"{unit.name}.ipynb"
    path.write_text(json.dumps(notebook))
    return str(path)


def _submitted(tmp_path, monkeypatch, unit, **options):
    """submit() run as a notebook outside Colab runs it, in tmp_path: the answers the zip carries."""
    monkeypatch.chdir(tmp_path)
    (tmp_path / unit.name).mkdir(exist_ok=True)
    unit.write("template", str(tmp_path / unit.name))
    zip_path = notebook.submit(unit.name, list(unit.files), student="ada", **options)
    return read_submission(str(tmp_path / zip_path), unit)[1]


def test_outside_colab_the_zip_carries_the_saved_notebooks_answers(tmp_path, monkeypatch, capsys):
    unit = units.load("day01_relu_bias")
    elsewhere = tmp_path / "drive"
    elsewhere.mkdir()
    saved = _student_notebook_with_an_answer(elsewhere, unit, "the bytes bound it")
    monkeypatch.setattr("__main__.__session__", saved, raising=False)  # what JupyterLab's kernel sets
    answers = _submitted(tmp_path, monkeypatch, unit)
    assert [q for q, text in answers.items() if "the bytes bound it" in text] == list(answers)[:1]
    assert "as last saved" in capsys.readouterr().out


def test_a_submission_without_a_notebook_says_its_answers_are_missing(tmp_path, monkeypatch, capsys):
    unit = units.load("day01_relu_bias")
    monkeypatch.delattr("__main__.__session__", raising=False)
    monkeypatch.delenv("JPY_SESSION_NAME", raising=False)
    assert _submitted(tmp_path, monkeypatch, unit) == {}
    assert "written answers are NOT in this zip" in capsys.readouterr().out
    with pytest.raises(FileNotFoundError, match="notebook: no notebook file at 'gone.ipynb'"):
        _submitted(tmp_path, monkeypatch, unit, notebook="gone.ipynb")

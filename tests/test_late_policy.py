"""A late policy (autograder/late_policy.py) read from its TOML file, what it makes of a hand-in's
time, and what the gradebook shows of it: days late, the penalty and the late days used. No
grading runs: the results folders are written as batch.Grading leaves them."""

import csv
import datetime
import json
import os

import pytest

from autograder import gradebook
from autograder.__main__ import main
from autograder.late_policy import DAY, Lateness, LatePolicy, from_due, lateness, read_policy

UNIT = "day01_relu_bias"
DEADLINE = datetime.datetime(2031, 3, 1, 23, 59, tzinfo=datetime.timezone(datetime.timedelta(hours=-5))).timestamp()


def _policy(tmp_path, text: str) -> str:
    path = tmp_path / "late.toml"
    path.write_text(text)
    return str(path)


def test_a_policy_is_read_with_its_time_zone(tmp_path):
    policy = read_policy(
        _policy(tmp_path, "deadline = 2031-03-01T23:59:00-05:00\ngrace_minutes = 15\npenalty_per_day = 0.1\n")
    )
    assert policy == LatePolicy(DEADLINE, 15.0, 0.1)
    budget = read_policy(
        _policy(tmp_path, 'deadline = "2031-03-02T04:59:00Z"\nlate_days = 3\n[late_days_left]\n"Ada@Example.edu" = 1\n')
    )
    assert budget == LatePolicy(DEADLINE, 0.0, None, 3, {"ada@example.edu": 1})


@pytest.mark.parametrize(
    "text, said",
    [
        (
            "deadline = 2031-03-01T23:59:00\n",
            "deadline is datetime.datetime(2031, 3, 1, 23, 59); expected a date and time with its time zone",
        ),
        ("grace_minutes = 5\n", "deadline is None; expected a date and time with its time zone"),
        (
            "deadline = 2031-03-01T23:59:00Z\npenalty_per_day = 1.5\n",
            "penalty_per_day is 1.5; expected a number from 0 to 1",
        ),
        ("deadline = 2031-03-01T23:59:00Z\ngrace_minutes = -1\n", "grace_minutes is -1; expected a number 0 or more"),
        ("deadline = 2031-03-01T23:59:00Z\nlate_days = 1.5\n", "late_days is 1.5; expected a whole number of days"),
        (
            "deadline = 2031-03-01T23:59:00Z\nlate_days = 2\npenalty_per_day = 0.1\n",
            "expected penalty_per_day or late_days, not both",
        ),
        ("deadline = 2031-03-01T23:59:00Z\n[late_days_left]\nada = 1\n", "late_days_left without late_days"),
        ("deadline = 2031-03-01T23:59:00Z\npenalty = 0.1\n", "unknown key 'penalty'; expected some of deadline"),
        ("deadline = \n", "expected a readable TOML file"),
    ],
)
def test_a_bad_policy_is_named_by_its_file_and_key(tmp_path, text, said):
    path = _policy(tmp_path, text)
    with pytest.raises(ValueError) as error:
        read_policy(path)
    assert f"--late-policy {path!r}: " in str(error.value) and said in str(error.value), str(error.value)


def test_a_day_late_is_any_started_day_past_the_deadline_and_its_grace():
    penalty = LatePolicy(DEADLINE, grace_minutes=10, penalty_per_day=0.25)
    at = lambda seconds: lateness(penalty, DEADLINE + seconds, {})  # noqa: E731
    assert at(-5) == at(600) == Lateness() and lateness(penalty, None, {}) == Lateness()
    assert at(601) == Lateness(1, 0.25) and at(600 + DAY) == Lateness(1, 0.25) and at(601 + DAY) == Lateness(2, 0.5)
    assert at(600 + 9 * DAY) == Lateness(9, 1.0), "never more than the whole score"
    budget = LatePolicy(DEADLINE, late_days=2, late_days_left={"ada@example.edu": 0})
    assert lateness(budget, DEADLINE + 1.5 * DAY, {"email": "bob@example.edu"}) == Lateness(2, 0.0, 2)
    assert lateness(budget, DEADLINE + 2.5 * DAY, {"email": "bob@example.edu"}) == Lateness(3, 1.0, 2)
    assert lateness(budget, DEADLINE + 1, {"email": "ADA@example.edu "}) == Lateness(1, 1.0, 0)
    assert lateness(from_due("2031-03-01T23:59:00-05:00"), DEADLINE + 1, {}) == Lateness(1), "--due takes nothing off"


def _graded(out, who: str, handed_in: float, score: float) -> None:
    folder = out / gradebook.RESULTS / who
    folder.mkdir(parents=True)
    students = [{"name": who, "email": f"{who}@example.edu"}]
    (folder / gradebook.STATE).write_text(
        json.dumps({"status": "graded", "students": students, "handed_in": handed_in})
    )
    test = {
        "name": "cpu_values",
        "score": score,
        "max_score": 4.0,
        "status": "passed",
        "output": "",
        "tags": ["values"],
    }
    (folder / "results.json").write_text(json.dumps({"score": score, "tests": [test], "extra_data": {"unit": UNIT}}))


def _book(out) -> dict:
    with open(out / "gradebook.csv", newline="") as handle:
        return {row["Submission"]: row for row in csv.DictReader(handle)}


def test_merge_with_a_policy_shows_days_late_and_takes_the_penalty_off(tmp_path):
    _graded(tmp_path, "ada", DEADLINE - 60, 4.0)
    _graded(tmp_path, "grace", DEADLINE + 1.5 * DAY, 4.0)
    path = _policy(tmp_path, "deadline = 2031-03-01T23:59:00-05:00\npenalty_per_day = 0.25\n")
    assert main(["merge", str(tmp_path), "--unit", UNIT, "--late-policy", path]) == 0
    book = _book(tmp_path)
    late = ("Status", "Total Score", "Days late", "Late penalty", "Late days used")
    assert [book["ada"][c] for c in late] == [gradebook.GRADED, "4", "0", "0%", "0"]
    assert [book["grace"][c] for c in late] == [f"{gradebook.GRADED}; {gradebook.LATE}", "2", "2", "50%", "0"]
    assert book["grace"]["values"] == "4", "the groups' points are the grader's, before the penalty"


def test_a_late_day_budget_is_spent_per_student(tmp_path):
    _graded(tmp_path, "ada", DEADLINE + 0.5 * DAY, 4.0)
    _graded(tmp_path, "bob", DEADLINE + 0.5 * DAY, 4.0)
    path = _policy(
        tmp_path, 'deadline = 2031-03-01T23:59:00-05:00\nlate_days = 2\n[late_days_left]\n"bob@example.edu" = 0\n'
    )
    assert main(["merge", str(tmp_path), "--unit", UNIT, "--late-policy", path]) == 0
    book = _book(tmp_path)
    assert [book["ada"][c] for c in ("Total Score", "Days late", "Late days used")] == ["4", "1", "1"]
    assert [book["bob"][c] for c in ("Total Score", "Late penalty", "Late days used")] == ["0", "100%", "0"]


def test_due_and_a_policy_are_one_path(tmp_path, capsys):
    _graded(tmp_path, "ada", DEADLINE + 60, 4.0)
    path = _policy(tmp_path, "deadline = 2031-03-01T23:59:00-05:00\n")
    with pytest.raises(SystemExit):
        main(["merge", str(tmp_path), "--unit", UNIT, "--late-policy", path, "--due", "2031-03-01T23:59-05:00"])
    assert "expected --due or --late-policy, not both" in capsys.readouterr().err
    assert main(["merge", str(tmp_path), "--unit", UNIT, "--due", "2031-03-01T23:59-05:00"]) == 0
    due = _book(tmp_path)["ada"]
    assert main(["merge", str(tmp_path), "--unit", UNIT, "--late-policy", path]) == 0
    assert _book(tmp_path)["ada"] == due and due["Days late"] == "1" and due["Total Score"] == "4"
    with pytest.raises(SystemExit):
        main(["merge", str(tmp_path), "--unit", UNIT, "--late-policy", str(tmp_path / "nothing.toml")])
    assert "nothing.toml': expected a readable TOML file" in capsys.readouterr().err


def test_grade_all_reads_each_hand_ins_time_from_its_file(tmp_path, monkeypatch):
    """A folder of hand-ins: each file's modification time is when it was handed in."""
    from test_batch import _fake_cpu_gradings  # gradings that run nothing

    _fake_cpu_gradings(monkeypatch)
    hand_ins = tmp_path / "class"
    hand_ins.mkdir()
    for who, when in (("ada", DEADLINE - 60), ("bob", DEADLINE + 1.5 * DAY)):
        (hand_ins / f"{who}.ipynb").write_text("{}")
        os.utime(hand_ins / f"{who}.ipynb", (when, when))
    path = _policy(tmp_path, "deadline = 2031-03-01T23:59:00-05:00\npenalty_per_day = 0.25\n")
    out = tmp_path / "out"
    argv = ["grade-all", str(hand_ins), "--unit", UNIT, "--out", str(out), "--gpus", "none", "--cpu-only"]
    assert main(argv + ["--late-policy", path]) == 0
    book = _book(out)
    assert [book["ada"][c] for c in ("Total Score", "Days late")] == ["1", "0"]
    assert [book["bob"][c] for c in ("Total Score", "Days late", "Late penalty")] == ["0.5", "2", "50%"]

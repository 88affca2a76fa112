"""An instructor's answer key answers every question its unit's lesson asks, and no other, and
gives each its points and the rubric they come from (course/spec/answer_key.py)."""

import os
import re

import pytest
from toy_course import make_course

from course.spec import answer_key, units
from course.spec.answer_key import AnswerKeyError, parse
from course.spec.questions import questions

KEYED = [u for u in units.all_units() if os.path.exists(os.path.join(u.folder, "answers.md"))]


def test_every_unit_with_questions_has_a_key():
    assert [u.name for u in units.all_units() if questions(u)] == [u.name for u in KEYED]


@pytest.mark.parametrize("unit", KEYED, ids=lambda u: u.name)
def test_every_question_has_a_model_answer_points_and_a_rubric(unit):
    with open(os.path.join(unit.folder, "answers.md"), encoding="utf-8") as handle:
        sections = dict(re.findall(r"^## (\S+)\n(.*?)(?=^## |\Z)", handle.read(), re.MULTILINE | re.DOTALL))
    asked = {question.id for question in questions(unit)}
    assert set(sections) == asked, f"answers.md answers {sorted(sections)}, the lesson asks {sorted(asked)}"
    for question, text in sections.items():
        assert "**Model answer.**" in text, f"{unit.name} {question}: a model answer"
    key = answer_key.answer_key(unit)  # an AnswerKeyError names the unit and the question
    assert set(key) == asked
    for marking in key.values():
        assert marking.points > 0 and all(item.text for item in marking.rubric), marking
    assert answer_key.points(unit) == {q: key[q].points for q in asked}


def test_day04s_diagnoses_are_graded_written_work():
    unit = units.load("day04_layernorm_edge_cases")
    worth = answer_key.points(unit)
    assert [q for q in worth if q.startswith("d")] == [f"d{i}" for i in range(1, 7)]
    assert all(worth[f"d{i}"] > 0 for i in range(1, 7))


KEY = """# a key

## q1

**Model answer.** Because.

Points: 3

Rubric:
- 1 point: names the cause.
- 2 points: the fix, with why it
  works.

## q2

**Model answer.** So.
{q2}
"""


def test_a_key_is_read_into_points_and_rubric_items():
    key = parse(KEY.format(q2="\nPoints: 0.5\n\nRubric:\n- 0.5 points: anything.\n"), "toy answers.md")
    assert key["q1"].points == 3 and [i.points for i in key["q1"].rubric] == [1, 2]
    assert key["q1"].rubric[1].text == "the fix, with why it works."
    assert key["q2"].points == 0.5


@pytest.mark.parametrize(
    "q2, said",
    [
        ("", "toy answers.md, question q2: expected one `Points: N` line under its heading, found 0"),
        ("\nPoints: many\n", "toy answers.md, question q2: Points: 'many' is not a number of points above 0"),
        ("\nPoints: 2\n", "toy answers.md, question q2: no `Rubric:` line"),
        ("\nPoints: 2\n\nRubric:\n- 1 point: a.\n", "question q2: Points: 2, but its rubric's items add up to 1"),
        ("\nPoints: 1\n\nRubric:\n- one point: a.\n", "rubric item '- one point: a.': 'one' is not a number of points"),
        (
            "\nPoints: 1\n\nRubric:\n- names it.\n",
            "rubric item '- names it.': expected `- N point(s): what earns them`",
        ),
    ],
)
def test_a_question_without_its_points_is_named_with_its_unit(q2, said):
    with pytest.raises(AnswerKeyError) as error:
        parse(KEY.format(q2=q2), "toy answers.md")
    assert said in str(error.value)


def test_a_unit_whose_key_leaves_out_a_question_is_named(tmp_path):
    unit = units.load("toy01_jit", str(make_course(str(tmp_path))))
    (tmp_path / "solutions" / "toy01_jit" / "answers.md").write_text(
        "# key\n\n## q9\n\nPoints: 1\n\nRubric:\n- 1 point: x.\n"
    )
    with pytest.raises(AnswerKeyError, match="toy01_jit answers.md: question q1 has no points"):
        answer_key.points(unit)


def test_the_graders_version_follows_the_points_not_the_rubrics_wording(tmp_path):
    from autograder.version import grader_version

    unit = units.load("toy01_jit", str(make_course(str(tmp_path))))
    key = tmp_path / "solutions" / "toy01_jit" / "answers.md"
    before = grader_version(unit)
    key.write_text(key.read_text().replace("the significand is unchanged", "the mantissa stays"))
    assert grader_version(unit) == before, "a reworded rubric grades no class again"
    key.write_text(key.read_text().replace("Points: 1", "Points: 2").replace("- 1 point:", "- 2 points:"))
    assert grader_version(unit) != before, "new points: the class is graded again, out of them"


# What students and instructors read may quote only figures some GPU measured, each labelled
# by it: a promise of numbers to come stays a promise, and a key that gives points must not say
# the instructor decides them.
_STALE = re.compile(r"not measured yet|no measured numbers|measured yet|worth what the instructor decides", re.I)


def _stale_claims(text: str) -> list[str]:
    return [match.group(0) for match in _STALE.finditer(" ".join(text.split()))]


def test_a_promise_of_numbers_to_come_is_found_across_a_line_break():
    text = "Turing (T4) numbers are not\nmeasured yet. The lesson has No measured\nnumbers yet."
    assert _stale_claims(text) == ["not measured yet", "No measured numbers"]
    assert _stale_claims("the instructor notebook's run on an H200 (43a5a05) read 0.51") == []


@pytest.mark.parametrize("unit", units.all_units(), ids=lambda u: u.name)
@pytest.mark.parametrize("name", ["answers.md", "lesson.md"])
def test_keys_and_lessons_quote_measured_figures_not_promises(unit, name):
    path = os.path.join(unit.folder, name)
    if not os.path.exists(path):
        pytest.skip(f"{unit.name} has no {name}")
    with open(path, encoding="utf-8") as handle:
        found = _stale_claims(handle.read())
    assert not found, (
        f"{unit.name}/{name} says {found}: quote the figure a run measured, labelled by its GPU "
        "and commit, or say how the student's own output answers it"
    )

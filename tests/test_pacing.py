"""The pacing guide counts what each lesson section asks of a student."""

import pytest

from course.authoring.pacing import minutes, pacing_text, sections
from course.spec import units
from course.spec.questions import questions
from course.spec.regions import solution_lines

TOY = """int f() {
  // BEGIN SOLUTION
  // a comment is not a line to write
  int a = 1;

  return a;
  // STUB
  return 0;  // TODO(dayXX)
  // END SOLUTION
}
"""


def test_solution_lines_counts_code_in_solution_regions_only():
    assert solution_lines(TOY) == 2


@pytest.mark.parametrize("unit", units.all_units(), ids=lambda u: u.name)
def test_every_region_and_question_lands_in_a_section(unit):
    """The sections hold every line the student writes and every question the lesson asks: a
    source left out of the lesson, or a directive the guide misreads, shows up here."""
    found = sections(unit)
    assert sum(row["lines"] for row in found) == sum(solution_lines(unit.raw(f), f) for f in unit.sources)
    assert sum(row["questions"] for row in found) == len(questions(unit))
    assert [row["title"] for row in found] == [
        line[3:].strip() for line in unit.raw("lesson.md").splitlines() if line.startswith("## ")
    ]


def test_the_estimate_follows_the_model():
    unit = units.load("day02_layernorm_forward")
    found = {row["title"]: row for row in sections(unit)}
    kernel = found["3. The kernel"]
    assert kernel["files"] == ["reductions.cuh", "layernorm_forward.cu"] and kernel["lines"] > 0
    assert minutes(dict(words=150, lines=2, questions=1)) == 1 + 3 + 5
    assert minutes(dict(words=0, lines=0, questions=0)) == 0
    text = pacing_text(unit)
    assert f"about {sum(minutes(row) for row in found.values())} minutes" in text
    assert "**Comes after:** `day01_relu_bias`." in text

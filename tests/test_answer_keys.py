"""An instructor's answer key answers every question its unit's lesson asks, and no other."""

import os
import re

import pytest

from course.spec import units
from course.spec.questions import questions

KEYED = [u for u in units.all_units() if os.path.exists(os.path.join(u.folder, "answers.md"))]


@pytest.mark.parametrize("unit", KEYED, ids=lambda u: u.name)
def test_every_question_has_a_model_answer_and_a_rubric(unit):
    with open(os.path.join(unit.folder, "answers.md"), encoding="utf-8") as handle:
        sections = dict(re.findall(r"^## (\S+)\n(.*?)(?=^## |\Z)", handle.read(), re.MULTILINE | re.DOTALL))
    asked = {question.id for question in questions(unit)}
    assert set(sections) == asked, f"answers.md answers {sorted(sections)}, the lesson asks {sorted(asked)}"
    for question, text in sections.items():
        assert "**Model answer.**" in text and "**Rubric.**" in text, f"{question}: a model answer and a rubric"

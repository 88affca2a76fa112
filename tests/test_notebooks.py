"""Run-all of the generated notebooks in a fresh folder, as a student would in Colab."""
import os

import pytest

from course import units
from course.run_notebook import outputs_text, run

pytestmark = pytest.mark.notebook
UNITS = [u.name for u in units.all_units()]


@pytest.mark.parametrize("name", UNITS)
def test_student_notebook_stops_at_the_public_tests_with_todo_messages(name, tmp_path):
    ok, notebook, error = run(os.path.join(units.NOTEBOOKS, f"{name}.ipynb"), str(tmp_path))
    text = outputs_text(notebook)
    assert not ok and "PublicTestsFailed" in error, error[-2000:]
    assert f"Built {name}" in text  # the starter code compiles as given
    assert f"TODO({name.split('_')[0]})" in text


@pytest.mark.parametrize("name", UNITS)
def test_instructor_notebook_runs_to_the_end(name, tmp_path):
    ok, notebook, error = run(os.path.join(units.NOTEBOOKS, "instructor", f"{name}.ipynb"), str(tmp_path))
    text = outputs_text(notebook)
    assert ok, error[-3000:]
    assert "public tests passed" in text and (tmp_path / f"submission_{name}.zip").exists()

"""The debugging lab's cell helper (course/lab.py): what it refuses, how it plants a bug, and
what it says on a machine without a GPU. On a GPU the instructor notebook's run checks that
each planted bug is found (tests/test_notebooks.py)."""

import pytest
import torch

from course import lab
from course.spec import units

UNIT = units.load("day04_layernorm_edge_cases")


def test_a_bug_is_planted_in_a_copy_and_only_where_its_code_is_found_once(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    UNIT.write("solution", str(tmp_path / UNIT.name))
    edit = UNIT.planted_regions()["row_offset_in_32_bits"]
    folder = lab._planted_copy(UNIT.name, list(UNIT.files), edit)
    planted = (tmp_path / folder / edit["file"]).read_text()
    assert edit["new"] in planted and edit["old"] not in planted
    assert edit["old"] in (tmp_path / UNIT.name / edit["file"]).read_text()  # the student's own copy is untouched
    with pytest.raises(ValueError, match="not once"):
        lab._planted_copy(UNIT.name, list(UNIT.files), {**edit, "old": "acc_t"})


def test_a_tool_it_does_not_know_and_tests_without_cases_are_refused():
    with pytest.raises(ValueError, match="tool must be one of"):
        lab.find_bug(UNIT.name, list(UNIT.files), "valgrind")
    with pytest.raises(ValueError, match="name the public cases"):
        lab.find_bug(UNIT.name, list(UNIT.files), "tests")


@pytest.mark.skipif(torch.cuda.is_available(), reason="what it says where there is no GPU")
def test_without_a_gpu_it_says_so_and_finds_nothing(capsys):
    assert lab.find_bug(UNIT.name, list(UNIT.files), "memcheck") is False
    assert "no GPU here" in capsys.readouterr().out

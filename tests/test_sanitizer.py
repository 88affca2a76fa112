"""compute-sanitizer over the references' small CUDA cases: clean under memcheck and racecheck;
and each planted bug (solutions/<unit>/planted_bugs.toml) reported by the tool it names."""
import os

import pytest

from autograder import mutants
from conftest import HAS_GPU
from course.authoring import units
from course.sanitize import TOOLS, find_sanitizer, run_sanitizer, small_cuda_cases

SANITIZED_UNITS = [u for u in units.all_units() if u.has_tests() and u.build == "jit" and small_cuda_cases(u.tests())]
PLANTED = [(unit, bug) for unit in units.all_units() if os.path.exists(unit.planted_bugs_path)
           for bug in mutants.load_file(unit.planted_bugs_path).values()]
needs_sanitizer = pytest.mark.skipif(not HAS_GPU or find_sanitizer() is None,
                                     reason="needs a GPU and compute-sanitizer")


@pytest.mark.parametrize("unit, bug", PLANTED, ids=lambda p: getattr(p, "name", ""))
def test_planted_bug_applies_and_names_a_tool(unit, bug, tmp_path):
    assert bug.found_by in TOOLS, f"{bug.name}: found_by must be one of {TOOLS}"
    mutants.write(unit, bug, str(tmp_path))  # raises where the reference no longer has its edit


@needs_sanitizer
@pytest.mark.parametrize("tool", ["memcheck", "racecheck"])
@pytest.mark.parametrize("unit", SANITIZED_UNITS, ids=lambda u: u.name)
def test_reference_is_clean_under_the_sanitizer(unit, tool, tmp_path):
    source = tmp_path / "src"
    unit.write("solution", str(source))
    report = run_sanitizer(tool, unit, str(source), str(tmp_path / "build"))
    assert report.clean, report.output


@needs_sanitizer
@pytest.mark.parametrize("unit, bug", PLANTED, ids=lambda p: getattr(p, "name", ""))
def test_planted_bug_is_found_by_its_tool(unit, bug, tmp_path):
    source = tmp_path / "src"
    mutants.write(unit, bug, str(source))
    report = run_sanitizer(bug.found_by, unit, str(source), str(tmp_path / "build"))
    assert not report.clean, f"{bug.found_by} found nothing in {bug.name}:\n{report.output}"

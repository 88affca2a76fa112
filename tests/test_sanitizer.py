"""compute-sanitizer over the references' small CUDA cases: clean under memcheck and racecheck;
and each planted bug (solutions/<unit>/planted_bugs.toml) reported by the tool it names. A bug
the tests find instead is graded with the mutants (tests/test_autograder.py)."""

import pytest
from conftest import HAS_GPU
from helpers import explain

from autograder.grade import grade
from autograder.grade_options import GradeOptions
from course.lab import TESTS
from course.sanitize import SANITIZER, TOOLS, find_sanitizer, run_sanitizer, small_cuda_cases
from course.spec import mutants, units

SANITIZED_UNITS = [u for u in units.all_units() if u.has_tests() and u.build == "jit" and small_cuda_cases(u.tests())]
PLANTED = [(unit, bug) for unit in units.all_units() for bug in mutants.load_planted(unit).values()]
SANITIZED_BUGS = [(unit, bug) for unit, bug in PLANTED if bug.found_by in TOOLS]
needs_sanitizer = pytest.mark.skipif(
    not HAS_GPU or find_sanitizer() is None, reason="needs a GPU and compute-sanitizer"
)


@pytest.mark.parametrize("unit, bug", PLANTED, ids=lambda p: getattr(p, "name", ""))
def test_planted_bug_applies_and_names_a_tool(unit, bug, tmp_path):
    assert bug.found_by in (*TOOLS, TESTS), f"{bug.name}: found_by must be one of {TOOLS} or {TESTS!r}"
    assert (bug.found_by == TESTS) == bool(bug.loses), f"{bug.name}: a bug the tests find says which they lose"
    mutants.write(unit, bug, str(tmp_path))  # raises where the reference no longer has its edit


@pytest.mark.parametrize("unit", [u for u in units.all_units() if u.planted_regions()], ids=lambda u: u.name)
def test_every_bug_the_starter_ships_is_listed(unit):
    """A BUG region in the sources is a bug the students get: planted_bugs.toml says what finds it."""
    listed = mutants.load_planted(unit)
    assert set(unit.planted_regions()) <= set(listed), "BUG regions missing from planted_bugs.toml"
    template = "".join(unit.template(f) for f in unit.sources)
    for name, edit in unit.planted_regions().items():
        assert edit["new"] in template and edit["old"] != edit["new"], name


@needs_sanitizer
@pytest.mark.parametrize("tool", ["memcheck", "racecheck"])
@pytest.mark.parametrize("unit", SANITIZED_UNITS, ids=lambda u: u.name)
def test_reference_is_clean_under_the_sanitizer(unit, tool, tmp_path):
    source = tmp_path / "src"
    unit.write("solution", str(source))
    report = run_sanitizer(tool, unit.plan(), str(source), str(tmp_path / "build"), unit.solutions)
    assert report.clean, report.output


@needs_sanitizer
@pytest.mark.parametrize("unit, bug", SANITIZED_BUGS, ids=lambda p: getattr(p, "name", ""))
def test_planted_bug_is_found_by_its_tool(unit, bug, tmp_path):
    source = tmp_path / "src"
    mutants.write(unit, bug, str(source))
    report = run_sanitizer(bug.found_by, unit.plan(), str(source), str(tmp_path / "build"), unit.solutions)
    assert not report.clean, f"{bug.found_by} found nothing in {bug.name}:\n{report.output}"


GRADED_BUGS = [
    (unit, bug)
    for unit, bug in SANITIZED_BUGS
    if any(case.kind == SANITIZER and case.params["tool"] == bug.found_by for case in unit.tests().CASES)
]


@needs_sanitizer
@pytest.mark.parametrize("unit, bug", GRADED_BUGS, ids=lambda p: getattr(p, "name", ""))
def test_the_grader_takes_the_points_of_a_planted_bug_s_tool(unit, bug, tmp_path):
    """The autograder's sanitizer cases: the bug loses its tool's case. A bad access leaves the
    values right, so it keeps the other tool's; a race may give wrong values in the other
    tool's slowed run too, which then rightly fails it."""
    mutants.write(unit, bug, str(tmp_path / "submission"))
    sanitized = tuple(case.name for case in unit.tests().CASES if case.kind == SANITIZER)
    options = GradeOptions(seed=3, work=str(tmp_path / "work"), tests=sanitized)
    result = grade(str(tmp_path / "submission"), unit, options)
    failed = {t.name for t in result.tests if t.name in sanitized and not t.passed}
    assert f"cuda_{bug.found_by}" in failed, explain(result)
    if bug.found_by != "racecheck":
        assert failed == {f"cuda_{bug.found_by}"}, explain(result)

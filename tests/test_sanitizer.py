"""compute-sanitizer over the references' small CUDA cases: clean under each tool their suite
grades; and each planted bug (solutions/<unit>/planted_bugs.toml) reported by the tool it
names, as the lab's cells run it (course/lab.py). Every planted bug that lists what it loses is
also graded like a mutant (tests/test_autograder.py): a bug a sanitizer finds loses that
tool's graded case."""

import pytest
from conftest import HAS_GPU

from course.lab import SUITE_TOOLS, TESTS, find_bug
from course.sanitize import SANITIZER, TOOLS, find_sanitizer, run_sanitizer, small_cuda_cases
from course.spec import mutants, units

SANITIZED_UNITS = [u for u in units.all_units() if u.has_tests() and u.build == "jit" and small_cuda_cases(u.tests())]
PLANTED = [(unit, bug) for unit in units.all_units() for bug in mutants.load_planted(unit).values()]
SANITIZED_BUGS = [(unit, bug) for unit, bug in PLANTED if bug.found_by in TOOLS]
SUITE_TOOL_BUGS = [(unit, bug) for unit, bug in PLANTED if bug.found_by in SUITE_TOOLS]
needs_sanitizer = pytest.mark.skipif(
    not HAS_GPU or find_sanitizer() is None, reason="needs a GPU and compute-sanitizer"
)


def _graded_tools(unit) -> list[str]:
    return [case.params["tool"] for case in unit.tests().CASES if case.kind == SANITIZER]


@pytest.mark.parametrize("unit, bug", PLANTED, ids=lambda p: getattr(p, "name", ""))
def test_planted_bug_applies_and_names_a_tool(unit, bug, tmp_path):
    tools = (*TOOLS, *SUITE_TOOLS, TESTS)
    assert bug.found_by in tools, f"{bug.name}: found_by must be one of {tools}"
    if bug.found_by not in TOOLS:
        assert bug.loses, f"{bug.name}: a bug the tests or gradcheck find says which tests it loses"
    elif bug.found_by in _graded_tools(unit):  # graded like a mutant: it loses its tool's case
        assert f"cuda_{bug.found_by}" in bug.expected_losses([f"cuda_{bug.found_by}"]), bug.name
    if bug.name in unit.planted_regions():  # a lab's bug says what the student sees, and what its tool says
        assert bug.symptom and bug.report, f"{bug.name}: planted_bugs.toml gives its symptom and report"
    mutants.write(unit, bug, str(tmp_path))  # raises where the reference no longer has its edit


@pytest.mark.parametrize("unit", [u for u in units.all_units() if u.planted_regions()], ids=lambda u: u.name)
def test_every_bug_the_starter_ships_is_listed(unit):
    """A BUG region in the sources is a bug the students get: planted_bugs.toml says what finds it."""
    listed = mutants.load_planted(unit)
    assert set(unit.planted_regions()) <= set(listed), "BUG regions missing from planted_bugs.toml"
    template = "".join(unit.template(f) for f in unit.sources)
    for name, edit in unit.planted_regions().items():
        assert edit["new"] in template and edit["old"] != edit["new"], name


@pytest.mark.parametrize("unit", [u for u in units.all_units() if u.planted_regions()], ids=lambda u: u.name)
def test_a_lab_s_suite_has_a_case_for_each_suite_tool_its_bugs_name(unit):
    from course.lab import lab_cases

    public = unit.tests(hidden=False)
    for bug in mutants.load_planted(unit).values():
        if bug.found_by in SUITE_TOOLS:
            assert lab_cases(public).get(bug.found_by), f"{bug.name}: the public suite has no LAB_CASES for it"


def _reference_tool_params():
    for unit in SANITIZED_UNITS:
        for tool in _graded_tools(unit) or ["memcheck", "racecheck"]:
            yield pytest.param(unit, tool, id=f"{unit.name}-{tool}")


@needs_sanitizer
@pytest.mark.parametrize("unit, tool", list(_reference_tool_params()))
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


@pytest.mark.gpu
@pytest.mark.parametrize("unit, bug", SUITE_TOOL_BUGS, ids=lambda p: getattr(p, "name", ""))
def test_the_lab_s_suite_tool_finds_its_bug_and_nothing_in_the_reference(unit, bug, tmp_path, monkeypatch, capsys):
    """The lab's cell as the instructor's notebook runs it: the solution, then the bug planted
    into it (find_bug's `plant`), in the folder named after the unit, as in a notebook."""
    monkeypatch.chdir(tmp_path)
    unit.write("solution", unit.name)
    assert not find_bug(unit.name, list(unit.files), bug.found_by, suites_root=unit.solutions), capsys.readouterr().out
    assert find_bug(unit.name, list(unit.files), bug.found_by, plant=bug.edits[0], suites_root=unit.solutions)
    assert f"{bug.found_by}: found a bug" in capsys.readouterr().out


@pytest.mark.parametrize("tool", ["memcheck", "initcheck"])
def test_only_initcheck_s_process_leaves_new_tensors_unfilled(tool, tmp_path):
    """The NaN fill writes every new tensor: under initcheck nothing would look unwritten. The
    process is started as the grader starts it, in the sandbox, whose environment keeps only
    the names it lets through (a planted initcheck bug went unseen while it dropped this one)."""
    import os

    from autograder.sandbox import Limits, Sandbox, python_command
    from course.sanitize import tool_env

    probe = (
        "import torch\nfrom course.harness import empty_is_nan\n"
        "with empty_is_nan():\n    print(torch.are_deterministic_algorithms_enabled())"
    )
    env = {**os.environ, **tool_env(tool)}
    sandbox = Sandbox.open("none", str(tmp_path), env=env)
    try:
        code, output = sandbox.run(
            python_command("-c", probe),
            timeout=120,
            writable=[str(tmp_path)],
            cwd=str(tmp_path),
            env=env,
            limits=Limits(cpu_seconds=120),
        )
    finally:
        sandbox.close()
    assert code == 0 and output.strip().splitlines()[-1] == str(tool != "initcheck"), output

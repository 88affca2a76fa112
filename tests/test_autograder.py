"""The autograder: full marks for the reference, only the build for the template, every
mutant loses exactly its tests, and a valid report whatever the submission does."""

import json
import os
import zipfile

import nbformat
import pytest
from conftest import GPUS, absent
from helpers import (
    cpu_path_has_todo,
    explain,
    sample_class_problems,
    skip_without_gpu_if_gpu_only,
    timed_marks,
    waits_in_template,
)

from autograder import report
from autograder.grade import grade
from autograder.grade_options import GradeOptions
from autograder.machine import gpu_free_bytes
from autograder.stages.plan import memory_short
from course.cases import needed
from course.sanitize import SANITIZER, find_sanitizer
from course.spec import mutants, units
from course.todos import todo_lines

pytestmark = pytest.mark.autograder
UNITS = [u for u in units.all_units() if u.has_tests()]


def _grade(unit, source_dir, tmp_path, seed=7, own_tests=False, tests=()):
    """own_tests: a package's own tests/ too (the reference's must pass; a mutant's say nothing)."""
    result = grade(
        str(source_dir), unit, GradeOptions(seed=seed, work=str(tmp_path / "work"), own_tests=own_tests, tests=tests)
    )
    path = report.write(result, str(tmp_path / "out"))
    with open(path) as handle:
        data = json.load(handle)  # valid JSON, whatever the submission did
    assert data["score"] == pytest.approx(sum(t["score"] for t in data["tests"]), abs=0.01)
    return result, data


def _failed(result):
    return {t.name for t in result.tests if not t.passed and not t.not_run}


# A unit graded by its timings (perf cases) is graded alone: `timed`.
@pytest.mark.parametrize(
    "unit", [pytest.param(u, id=u.name, marks=timed_marks(u.tests(hidden=True).CASES)) for u in UNITS]
)
def test_reference_gets_full_marks(unit, tmp_path):
    unit.write("solution", str(tmp_path / "submission"))
    result, data = _grade(unit, tmp_path / "submission", tmp_path, own_tests=True)
    assert _failed(result) == set(), explain(result)
    if unit.build == "wheel":  # its own tests ran, and are worth nothing
        own = next(t for t in result.tests if t.name == "own_tests")
        assert own.max_score == 0 and " passed" in own.output and "failed" not in own.output, own.output
    not_run = {t.name for t in result.tests if t.not_run}
    sanitized = {c.name for c in unit.tests().CASES if c.kind == SANITIZER}
    missing = {t.name for t in result.tests if len(t.tags) > 1 and absent(t.tags[1])}
    if find_sanitizer() is None:  # a GPU machine without the CUDA toolkit's tool reports them not run
        missing |= sanitized
    free = gpu_free_bytes() if not absent("cuda") else None  # a case larger than the GPU's memory is not run
    missing |= {c.name for c in unit.tests().CASES if memory_short(c, free)}
    assert not_run == missing
    assert data["extra_data"]["torch"]
    phases = [result.timings.get(key, 0.0) for key in ("inputs_s", "runs_s", "judging_s")]
    cases = {case.name for case in unit.tests(hidden=True).CASES}
    if any(t.name in cases and not t.not_run for t in result.tests):  # each phase took time, within the tests'
        assert all(seconds > 0 for seconds in phases) and sum(phases) <= result.timings["tests_s"], result.timings


@pytest.mark.parametrize("unit", UNITS, ids=lambda u: u.name)
def test_template_scores_only_the_build_and_paths_without_todos(unit, tmp_path):
    """Points for the build, and for the cases no TODO stands in the way of: where the suite
    says which functions each op runs, exactly those cases; else the CPU ones of days whose CPU
    code is given. Every other test fails naming a TODO. A package's build files are written
    (its raw template fails to build: the test after this one)."""
    skip_without_gpu_if_gpu_only(unit)
    unit.write("buildable", str(tmp_path / "submission"))
    result, _ = _grade(unit, tmp_path / "submission", tmp_path)
    passed = {t.name for t in result.tests if t.passed}
    spec = unit.tests()
    if hasattr(spec, "FUNCTIONS_RUN"):  # the suite says which cases the template's unwritten functions hold back
        waiting = {case.name for case in spec.CASES if waits_in_template(unit, spec, case)}
        of_an_op = {case.name for case in spec.CASES if "op" in case.params}  # not a sanitizer's run of them all
        failed = {t.name for t in result.tests if not t.passed and not t.not_run} & of_an_op
        assert "build" in passed and not passed & waiting and failed <= waiting, explain(result)
        # A case of no table row (one that names no op) may fail too, but only as refused.
        cases = {case.name for case in spec.CASES}
        # A perf case whose needed cases all failed is not timed: it names them, not a TODO.
        failed_names = {t.name for t in result.tests if not t.passed}
        held_back = {case.name for case in spec.CASES if case.needs and set(needed(case, spec.CASES)) <= failed_names}
        wrong = [
            t.name
            for t in result.tests
            if t.name in cases
            and t.name not in held_back
            and not t.passed
            and not t.not_run
            and f"TODO({unit.day})" not in t.output
        ]
        assert not wrong, explain(result)
    elif cpu_path_has_todo(unit):
        assert passed == {"build"}, explain(result)
    else:  # and the argument checks, where the template gives them whole (Triton units' wrappers)
        refused = {case.name for case in spec.CASES if case.kind == "error"}
        assert "build" in passed and all(
            t.tags[1] == "cpu" or t.name in refused for t in result.tests if t.name in passed - {"build"}
        ), explain(result)
    values = [
        t
        for t in result.tests
        if not t.passed
        and not t.not_run
        and "error" not in t.name
        and not t.output.startswith(("not timed", "not tested"))
    ]  # their needed cases failed
    assert values and all(f"TODO({unit.day})" in t.output for t in values), explain(result)


@pytest.mark.parametrize("unit", [u for u in UNITS if u.build_files], ids=lambda u: u.name)
def test_template_with_build_files_to_write_fails_its_build_naming_the_first_todo(unit, tmp_path):
    """A package's starter: its pyproject.toml and setup.py are valid files whose values are
    TODOs, so pip stops at once, and the build's entry says what to write first; nothing runs."""
    unit.write("template", str(tmp_path / "submission"))
    result, _ = _grade(unit, tmp_path / "submission", tmp_path)
    build = next(t for t in result.tests if t.name == "build")
    first = todo_lines(unit.build_files[0], unit.template(unit.build_files[0]))[0]
    assert not build.passed and first in build.output, explain(result)
    assert not any(t.passed for t in result.tests), explain(result)


def _mutant_params():
    for unit in UNITS:  # and the planted bugs that say what they lose (a debugging lab's starter ships them)
        planted = [bug for bug in mutants.load_planted(unit).values() if bug.loses]
        for mutant in [*mutants.load(unit).values(), *planted]:
            marks = ([pytest.mark.gpu] if mutant.gpu_only else []) + ([pytest.mark.timed] if mutant.timed else [])
            marks += [pytest.mark.slow] if mutant.slow else []
            if mutant.min_gpus > GPUS:
                marks.append(pytest.mark.skip(reason=f"what it loses runs on {mutant.min_gpus} GPUs; {GPUS} here"))
            yield pytest.param(unit, mutant, id=f"{unit.name}:{mutant.name}", marks=marks)


def _without_costly_cases_unless_lost(unit, mutant):
    """The cases to grade a mutant on: all but the sanitizer's, which add minutes to a grading
    on a GPU (tests/test_sanitizer.py grades the planted bugs on them), and those that start a new
    Python (a suite's NEW_PROCESS_CASES: seconds each, in every mutant's grading), unless it says
    it loses them. The reference's and the template's gradings run them all."""
    spec = unit.tests()
    costly = {c.name for c in spec.CASES if c.kind == SANITIZER} | set(getattr(spec, "NEW_PROCESS_CASES", ()))
    skipped = costly - mutant.expected_losses(sorted(costly))
    return tuple(c.name for c in spec.CASES if c.name not in skipped) if skipped else ()


@pytest.mark.parametrize("unit, mutant", list(_mutant_params()))
def test_mutant_loses_exactly_its_tests(unit, mutant, tmp_path):
    mutants.write(unit, mutant, str(tmp_path / "submission"))
    result, data = _grade(
        unit, tmp_path / "submission", tmp_path, tests=_without_costly_cases_unless_lost(unit, mutant)
    )
    ran = [t.name for t in result.tests if not t.not_run]
    either = mutant.unsettled(ran)
    assert _failed(result) - either == mutant.expected_losses(ran) - either, explain(result)
    if mutant.perf_partial:  # slower than the reference, not broken: some of the perf points
        perf = {case.name for case in unit.tests().CASES if case.kind == "perf"}
        earned = sum(t.score for t in result.tests if t.name in perf)
        possible = sum(t.max_score for t in result.tests if t.name in perf)
        assert 0 < earned < possible, explain(result)
    assert data["tests"] and data["extra_data"]["unit"] == unit.name  # the grader's report, not a fake
    assert _undiagnosed(result, mutant) == [], explain(result)


def _undiagnosed(result, mutant) -> list[str]:
    """The tests the mutant lost whose output does not name the cause it plants (its `diagnosis`):
    the grader's reading of the wrong outputs, shown in place of the case's hint. A perf test
    not timed for the cases it needs shows no reading."""
    return [
        f"{t.name}: expected {mutant.diagnosis_for(t.name)!r}"
        for t in result.tests
        if not t.passed
        and not t.not_run
        and mutant.diagnosis_for(t.name)
        and not t.output.startswith(("not timed", "not tested"))
        and mutant.diagnosis_for(t.name) not in t.output
    ]


def test_a_race_mutants_either_tests_count_neither_way(tmp_path, monkeypatch):
    """A test a race loses only sometimes (`either`) is right lost or kept; the others still
    have to be exactly its losses, in the test above and in a sample class's check."""
    unit = units.load("day03_layernorm_backward")
    race = mutants.load(unit)["partials_race"]
    assert race.unsettled(["cuda_gradcheck_fp64_many_rows", "cuda_fp32_small"]) == {"cuda_gradcheck_fp64_many_rows"}
    monkeypatch.setattr(mutants, "load", lambda unit: {"partials_race": race})
    names = [case.name for case in unit.tests(hidden=True).CASES]
    must = race.expected_losses(names) - race.unsettled(names)

    def problems(lost: set[str]) -> list[str]:
        return sample_class_problems(unit, str(tmp_path), "partials_race_0", names, lost)

    assert problems(must) == [] and problems(must | {"cuda_gradcheck_fp64_many_rows"}) == []
    assert "kept ['cuda_fp32_small']" in problems(must - {"cuda_fp32_small"})[0]
    assert "unexpectedly" in problems(must | {"cpu_fp32_tail"})[0]


def test_build_errors_name_file_and_line(tmp_path):
    unit = units.load("day02_layernorm_forward")
    unit.write("solution", str(tmp_path / "submission"))
    kernel = tmp_path / "submission" / "layernorm_forward.cu"
    kernel.write_text(kernel.read_text().replace("return cudaGetLastError();", "return cudaGetLastError()", 1))
    result, data = _grade(unit, tmp_path / "submission", tmp_path)
    build = data["tests"][0]
    assert build["name"] == "build" and build["status"] == "failed" and build["visibility"] == "visible"
    assert "layernorm_forward.cu(" in build["output"] or "layernorm_forward.cu:" in build["output"]
    assert data["score"] == 0 and all("build failed" in t.output for t in result.tests[1:])


def test_notebook_and_zip_submissions_are_read(tmp_path):
    """The student notebook's source cells, and the zip its submit cell makes, are graded the same."""
    from autograder.submission import read_submission

    unit = units.load("day02_layernorm_forward")
    notebook = nbformat.read(os.path.join(unit.repo, "notebooks", "instructor", f"{unit.name}.ipynb"), as_version=4)
    answer_cell = next(c for c in notebook.cells if c.metadata.get("course", {}).get("answer"))
    answer_cell.source = "*Your answer:* because"
    path = tmp_path / "submission.ipynb"
    nbformat.write(notebook, str(path))
    files, answers = read_submission(str(path), unit)
    assert files == {f: unit.solution(f) for f in unit.files}
    archive = tmp_path / "submission.zip"
    with zipfile.ZipFile(archive, "w") as handle:
        for name, text in files.items():
            handle.writestr(f"{unit.name}/{name}", text)
        handle.writestr(f"{unit.name}.ipynb", json.dumps(notebook))
    zipped, zipped_answers = read_submission(str(archive), unit)
    assert zipped == files and zipped_answers == answers and any("because" in a for a in answers.values())


@pytest.mark.gpu
@pytest.mark.timed
def test_an_op_that_computes_otherwise_when_unprofiled_earns_no_perf_points(tmp_path):
    """c01 of docs/security.md: its own kernel while the profiler is on (ten times over, a slow
    kernel of its own), PyTorch's layer norm while it is off, at the sizes the grader times. The
    own-code check at the timed size sees its kernel; the time the profiled call kept the GPU busy
    shows that the timed calls did not run it (autograder/timed_kernels.py)."""
    unit = units.load("day05_layernorm_performance")
    unit.write("solution", str(tmp_path / "submission"))
    entry = tmp_path / "submission" / "layernorm.py"
    hostile = os.path.join(os.path.dirname(report.__file__), "hostile", "notices_the_profiler.py")
    with open(hostile) as handle:
        entry.write_text(entry.read_text() + "\n" + handle.read())
    result, _ = _grade(
        unit,
        tmp_path / "submission",
        tmp_path,
        tests=("cuda_warp_per_row_*", "cuda_vectorized_*", "cuda_perf_fp32_d1024"),
    )
    assert _failed(result) == {"cuda_perf_fp32_d1024"}, explain(result)
    perf = next(t for t in result.tests if t.name == "cuda_perf_fp32_d1024")
    assert perf.score == 0 and "ran faster than the kernels it runs when profiled" in perf.output, perf.output

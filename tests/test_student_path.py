"""The student path: a student notebook solved region by region, run from a release, graded.

The whole path runs for day01 in the default suite; day02 and day06 (the other CPU paths that
build C++ and CUDA) are `slow`: `pytest -m slow tests/test_student_path.py` runs them.
"""

import json
import os
import subprocess
import sys

import nbformat
import pytest
import torch

from course.authoring import generate, kernel_limits, run_notebook
from course.authoring.solved_notebook import TemplateDrift, solved
from course.authoring.student_path import Options, build_seconds, kernel_environ, main, parse, run_units
from course.authoring.student_path_report import UnitRun, read_verdict, summary_line, write_summary
from course.notebook import SOURCE_MAGIC
from course.spec import regions, units

DAY01 = "day01_relu_bias"


def source_cells(notebook) -> dict[str, str]:
    """{file: text} of a notebook's %%writefile_if_changed cells."""
    cells = {}
    for cell in notebook.cells:
        header, _, text = cell.source.partition("\n")
        if cell.cell_type == "code" and header.startswith(SOURCE_MAGIC):
            cells[header.split("/", 1)[1]] = text
    return cells


def student_notebook(name: str):
    return generate.lesson_cells(units.load(name), solved=False)


def edit_cell(notebook, file: str, old: str, new: str) -> None:
    for cell in notebook.cells:
        if cell.source.startswith(f"{SOURCE_MAGIC} {DAY01}/{file}\n"):
            assert old in cell.source
            cell.source = cell.source.replace(old, new, 1)
            return
    raise AssertionError(f"no source cell for {file}")


@pytest.mark.parametrize("unit", units.all_units(), ids=lambda unit: unit.name)
def test_pieces_join_into_the_template_and_the_solution(unit):
    for file in unit.files:
        pieces = regions.pieces(unit.raw(file), file)
        assert "".join(piece.starter for piece in pieces) == regions.template_text(unit.raw(file))
        assert "".join(piece.solved for piece in pieces) == unit.solution(file)


def test_pieces_name_stubless_regions_and_bugs():
    text = (
        "a\n# BEGIN SOLUTION\nx = 1\n# END SOLUTION\nb\n"
        "# BEGIN BUG off_by_one\ny = n\n# PLANTED\ny = n - 1\n# END BUG\n"
    )
    assert regions.pieces(text) == [
        ("plain", "a\n", "a\n"),
        ("solution", "", "x = 1\n"),
        ("plain", "b\n", "b\n"),
        ("bug", "y = n - 1\n", "y = n\n"),
    ]


@pytest.mark.parametrize("name", [unit.name for unit in units.all_units()])
def test_a_solved_student_notebook_holds_the_solutions(name):
    unit = units.load(name)
    notebook = solved(student_notebook(name), unit, "s1234")
    assert source_cells(notebook) == {file: unit.solution(file) for file in unit.files}
    assert source_cells(notebook) == source_cells(generate.lesson_cells(unit, solved=True))
    assert sum("STUDENT = 's1234'" in cell.source for cell in notebook.cells) == 1


def test_a_template_changed_outside_its_regions_is_refused():
    notebook = student_notebook(DAY01)
    edit_cell(notebook, "relu_bias.cu", "#include <c10/util/Half.h>", "#include <c10/util/Half.h>  // moved")
    with pytest.raises(
        TemplateDrift,
        match=r"day01_relu_bias/relu_bias.cu: the notebook's cell differs from "
        r"solutions/day01_relu_bias/relu_bias.cu's template at its line \d+ "
        r"\(outside the TODO regions\).*// moved.*make the release again",
    ):
        solved(notebook, units.load(DAY01), "s1")


def test_a_stub_that_is_not_the_solutions_is_refused_naming_its_region():
    unit = units.load(DAY01)
    file = next(file for file in unit.sources if regions.stubs(unit.raw(file), file))
    stub = regions.stubs(unit.raw(file), file)[0]
    notebook = student_notebook(DAY01)
    edit_cell(notebook, file, stub, stub.replace("TODO", "TO DO", 1))
    with pytest.raises(TemplateDrift, match=rf"{DAY01}/{file}: .* \(in TODO region 1\): expected .*TODO"):
        solved(notebook, unit, "s1")


def test_a_cell_longer_than_its_template_is_refused():
    notebook = student_notebook(DAY01)
    for cell in notebook.cells:
        if cell.source.startswith(f"{SOURCE_MAGIC} {DAY01}/relu_bias.py"):
            cell.source += "print('extra')\n"
    with pytest.raises(TemplateDrift, match=r"relu_bias.py: the notebook's cell goes on past the end"):
        solved(notebook, units.load(DAY01), "s1")


def test_a_notebook_without_a_files_cell_or_a_student_line_is_refused():
    unit = units.load(DAY01)
    notebook = student_notebook(DAY01)
    header = f"{SOURCE_MAGIC} {DAY01}/relu_bias.h"
    notebook.cells = [cell for cell in notebook.cells if not cell.source.startswith(header)]
    with pytest.raises(TemplateDrift, match="no source cell for relu_bias.h"):
        solved(notebook, unit, "s1")
    notebook = student_notebook(DAY01)
    notebook.cells = [cell for cell in notebook.cells if "STUDENT" not in cell.source]
    with pytest.raises(TemplateDrift, match='one submit cell with STUDENT = "", found 0'):
        solved(notebook, unit, "s1")
    with pytest.raises(ValueError, match="student: expected an id"):
        solved(student_notebook(DAY01), unit, " ")


def test_a_drifted_release_fails_the_path_before_any_notebook_runs(tmp_path):
    from course.authoring import release

    folder = tmp_path / "release"
    release.write([units.load(DAY01)], str(folder))
    path = folder / "notebooks" / f"{DAY01}.ipynb"
    notebook = nbformat.read(str(path), as_version=4)
    edit_cell(notebook, "relu_bias.h", "#pragma once", "#pragma  once")
    nbformat.write(notebook, str(path))
    [result] = run_units(Options((DAY01,), release=str(folder)))
    assert not result.ok and "relu_bias.h: the notebook's cell differs" in result.problem
    assert result.notebook_s is None


def results_json(tests: list[dict], perf: dict | None = None) -> dict:
    return {"score": sum(test["score"] for test in tests), "tests": tests, "extra_data": {"perf": perf or {}}}


def entry(name, score, max_score, status, output="", tags=("group", "cpu")):
    return {
        "name": name,
        "score": score,
        "max_score": max_score,
        "status": status,
        "output": output,
        "tags": list(tags),
    }


def verdict(tmp_path, tests, gpus, perf=None) -> UnitRun:
    path = tmp_path / "results.json"
    path.write_text(json.dumps(results_json(tests, perf)))
    result = UnitRun("day00")
    read_verdict(str(path), result, gpus=gpus)
    return result


def test_a_perf_case_passes_by_its_score_and_gpu_cases_count_as_not_run_without_a_gpu(tmp_path):
    tests = [
        entry("build", 1, 1, "passed", tags=("build",)),
        entry("cpu_small", 1, 1, "passed"),
        entry("perf_large", 0.4, 2, "passed", "yours 1 ms", tags=("perf", "cuda")),
        entry("cuda_small", 0, 1, "failed", "not run: no GPU on the grading machine", tags=("g", "cuda")),
        entry(
            "two_gpus",
            0,
            1,
            "failed",
            "not run: needs cuda:1, and the grading machine shows 1 GPU(s)",
            tags=("cuda1_package", "cuda:1"),  # a group's name may start with "cuda"
        ),
        entry(
            "racecheck",
            0,
            1,
            "failed",
            "not run: compute-sanitizer is not on the grading machine",
            tags=("sanitizer", "cuda"),
        ),
        entry("written_q1", 0, 0, "failed", "no answer to grade: why?", tags=("written", "manual")),
    ]
    result = verdict(tmp_path, tests, gpus=0, perf={"perf_large": {"ratio": 0.61}})
    assert result.ok and result.passed == 3 and result.perf == {"perf_large": 0.61}
    assert result.not_run == {
        "no GPU on the grading machine": 1,
        "compute-sanitizer is not on the grading machine": 1,
        "needs cuda:1, and the grading machine shows 1 GPU(s)": 1,
    }
    result = verdict(tmp_path, tests, gpus=1)  # a GPU is here: the grader should have used it
    assert not result.ok and result.failed == ["cuda_small: not run: no GPU on the grading machine"]
    assert result.not_run == {
        "needs cuda:1, and the grading machine shows 1 GPU(s)": 1,
        "compute-sanitizer is not on the grading machine": 1,
    }


def test_a_slow_perf_case_a_failed_build_and_a_wrong_value_fail(tmp_path):
    tests = [
        entry("build", 1, 1, "passed", tags=("build",)),
        entry("perf_large", 0, 2, "failed", "0.50x the reference -> 0/2 points", tags=("perf", "cuda")),
        entry("cpu_small", 0, 1, "failed", "max error 3 > 1e-5\nmore"),
        entry("cpu_other", 0, 1, "failed", "not run: the build failed"),
    ]
    result = verdict(tmp_path, tests, gpus=1)
    assert not result.ok and result.problem == "3 test(s) failed"
    assert result.failed == [
        "perf_large: 0.50x the reference -> 0/2 points",
        "cpu_small: max error 3 > 1e-5",
        "cpu_other: not run: the build failed",
    ]
    assert not verdict(
        tmp_path,
        [entry("cuda_small", 0, 1, "failed", "not run: no GPU on the grading machine", tags=("g", "cuda"))],
        gpus=0,
    ).ok  # nothing passed at all


def test_the_summary_has_a_line_and_a_row_per_unit_with_its_times(tmp_path):
    passed = UnitRun(
        "day01_relu_bias",
        ok=True,
        notebook_s=15.4,
        build_s=[1.4],
        grading_s=196.0,
        grading_build_s=167.3,
        score=21.0,
        max_score=50.5,
        passed=24,
        not_run={"no GPU on the grading machine": 30},
        perf={"perf_large": 0.912},
    )
    drifted = UnitRun("day02_layernorm_forward", problem="day02_layernorm_forward/layernorm.cu: the cell differs")
    assert summary_line(passed) == (
        "day01_relu_bias: PASS; notebook 15.4 s (builds 1.4 s), grading 196 s "
        "(build 167.3 s); 21/50.5 points, 24 passed, 30 not run, 0 failed; "
        "perf perf_large 0.91x"
    )
    assert summary_line(drifted) == (
        "day02_layernorm_forward: FAIL; notebook - (builds none), grading - (build -); "
        "day02_layernorm_forward/layernorm.cu: the cell differs"
    )
    write_summary(str(tmp_path), [passed, drifted], {"t4": True})
    table = (tmp_path / "summary.md").read_text()
    assert "| day01_relu_bias | PASS | 15.4 | 1.4 | 196 | 167.3 | 21/50.5 | 24 | 30 | 0 |" in table
    assert "| day02_layernorm_forward | FAIL: day02_layernorm_forward/layernorm.cu" in table and "T4 settings" in table
    assert "- day01_relu_bias: not run: no GPU on the grading machine (30)" in table
    summary = json.loads((tmp_path / "summary.json").read_text())
    assert [unit["unit"] for unit in summary["units"]] == [passed.unit, drifted.unit] and summary["options"]["t4"]


def test_t4_gives_the_kernel_sm75_builds_two_cores_and_a_memory_cap(tmp_path):
    plain = kernel_environ(str(tmp_path / "release"), str(tmp_path), Options((DAY01,)))
    assert plain == {"COURSE_RELEASE": str(tmp_path / "release" / "runtime")}
    environ = kernel_environ(str(tmp_path / "release"), str(tmp_path), Options((DAY01,), t4=True))
    assert environ["TORCH_CUDA_ARCH_LIST"] == "7.5+PTX" and environ["MAX_JOBS"] == "2"
    assert environ[kernel_limits.CORES] == ",".join(map(str, sorted(os.sched_getaffinity(0))[:2]))
    assert environ[kernel_limits.GPU_MEMORY] == str(15 * 2**30)
    assert os.path.exists(os.path.join(environ["IPYTHONDIR"], "profile_default", "startup", "00-kernel-limits.py"))


def test_the_command_line_refuses_what_it_cannot_run(capsys):
    assert parse(["day01_relu_bias", "--t4", "--student", "s9"]) == Options((DAY01,), student="s9", t4=True)
    with pytest.raises(SystemExit):
        parse(["day01_relu_bias", "--timeout", "0"])
    assert "--timeout 0: expected a positive number of seconds" in capsys.readouterr().err
    with pytest.raises(SystemExit):
        main(["day99_nothing"])
    assert "UNIT day99_nothing: expected units of this course: day01_relu_bias," in capsys.readouterr().err


def test_build_seconds_reads_each_build_the_notebook_printed():
    text = f"Wrote x\nBuilt {DAY01} in 12.5 s\nBuilt day01_other in 3 s\nBuilt {DAY01} in 0.4 s\n"
    assert build_seconds(text, DAY01) == [12.5, 0.4]


def test_the_kernel_of_a_release_run_cannot_import_the_checkouts_course(tmp_path):
    env = run_notebook.kernel_env(str(tmp_path), {"COURSE_RELEASE": str(tmp_path / "runtime")})
    found = subprocess.run(
        [sys.executable, "-c", "import course"], cwd=tmp_path, env=env, capture_output=True, text=True, check=False
    )
    assert found.returncode != 0 and "the course runtime is not installed here" in found.stderr


@pytest.mark.notebook
def test_kernel_limits_confine_every_thread_of_the_kernel(tmp_path):
    core = max(os.sched_getaffinity(0))
    notebook = nbformat.v4.new_notebook()
    notebook.cells = [
        nbformat.v4.new_code_cell(
            "import os\nprint({tuple(sorted(os.sched_getaffinity(int(t)))) for t in os.listdir('/proc/self/task')})"
        )
    ]
    nbformat.write(notebook, str(tmp_path / "limits.ipynb"))
    environ = {
        "IPYTHONDIR": kernel_limits.startup_folder(str(tmp_path / "ipython")),
        kernel_limits.CORES: str(core),
        kernel_limits.GPU_MEMORY: str(15 * 2**30),
    }  # left alone without a GPU, and no error
    ok, ran, error = run_notebook.run(str(tmp_path / "limits.ipynb"), str(tmp_path / "work"), 120, environ)
    assert ok and run_notebook.outputs_text(ran).strip() == f"{{({core},)}}", error


def test_a_kernel_limit_that_cannot_be_set_is_reported_and_the_kernel_goes_on(tmp_path):
    startup = os.path.join(
        kernel_limits.startup_folder(str(tmp_path)), "profile_default", "startup", "00-kernel-limits.py"
    )
    env = dict(os.environ, **{kernel_limits.CORES: "not-a-core"})
    ran = subprocess.run(
        [sys.executable, "-c", f"exec(open({startup!r}).read()); print('went on')"],
        env=env,
        capture_output=True,
        text=True,
        check=False,
    )
    assert ran.stdout == "went on\n" and "COURSE_KERNEL_CORES='not-a-core' not set" in ran.stderr
    assert kernel_limits.memory_fraction(15 * 2**30, 140 * 2**30) == pytest.approx(15 / 140)
    assert kernel_limits.memory_fraction(15 * 2**30, 8 * 2**30) == 1.0


def student_path_passes(name: str, out) -> None:
    assert main([name, "--out", str(out), "--student", "s1234"]) == 0, (out / "summary.md").read_text()
    [result] = json.loads((out / "summary.json").read_text())["units"]
    assert result["ok"] and result["passed"] > 0 and not result["failed"], result
    assert result["build_s"] and result["notebook_s"] > 0 and result["grading_s"] > 0
    if not torch.cuda.is_available():
        assert set(result["not_run"]) <= {"no GPU on the grading machine"}
    text = (out / name / "notebook.txt").read_text()
    assert "course runtime" in text and "public tests passed" in text and "no STUDENT set" not in text


# In every run of the suite: the units CI plays as a student on the CPU. The other units with
# CPU paths in the slower tier (-m slow); on a GPU machine, every unit: scripts/gpu_check.sh student.
@pytest.mark.notebook
@pytest.mark.autograder
@pytest.mark.parametrize("name", [DAY01, "day02_layernorm_forward", "day06_bias_gelu"])
def test_the_student_path_passes(name, tmp_path):
    student_path_passes(name, tmp_path)


@pytest.mark.slow
@pytest.mark.notebook
@pytest.mark.autograder
@pytest.mark.parametrize(
    "name", ["day03_layernorm_backward", "day04_layernorm_edge_cases", "day07_layernorm_package", "day09_rmsnorm_int8"]
)
def test_the_student_path_of_a_slower_unit_passes(name, tmp_path):
    student_path_passes(name, tmp_path)

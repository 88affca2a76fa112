"""The stages of one grading (autograder/stages/), each on its own: the plan of a unit's cases,
the read and build of a submission that has nothing to build, the run of a plan with fake test
processes, the judge on canned raw results, the report and the extras. No build, no child
process."""

import os
import tempfile
import types

import pytest
import torch
from helpers import with_fresh_call_data

import autograder
from autograder import results
from autograder.baselines import Baselines, ChildSetting
from autograder.deadline import Deadline
from autograder.grade import grade
from autograder.grade_options import GradeOptions
from autograder.machine import child_env, perf_runs_here
from autograder.results import Grade
from autograder.runner import secret_order
from autograder.stages import run as run_stage
from autograder.stages.build import Build, build_sources, first_step_build
from autograder.stages.extras import extras, run_own_tests
from autograder.stages.grading import Grading
from autograder.stages.judge import judge_group
from autograder.stages.plan import plan_cases
from autograder.stages.read import read_submission
from autograder.stages.report import public_case_names, report_cases
from autograder.stages.run import Ran, run_cases
from course.build import Built
from course.cases import Case, make_input_sets
from course.judge import Verdict
from course.spec import units
from course.spec.questions import questions

UNIT = units.load("day01_relu_bias")
SPEC = UNIT.tests(hidden=True)
CASES = {case.name: case for case in SPEC.CASES}
PERF = Case(
    "cpu_perf", "cpu_perf", kind="perf", needs=("cpu_fp64_small",), params=dict(shape=(4, 8), full_at=0.9, zero_at=0.45)
)


def _spec(*names: str, extra: tuple[Case, ...] = ()):
    """day01's hidden suite with only the cases named (and `extra`)."""
    return types.SimpleNamespace(**{**vars(SPEC), "CASES": [CASES[n] for n in names] + list(extra)})


def _honest(case: Case, input_sets: list[dict]) -> dict:
    """A well-formed raw result with the right outputs, as a test process writes it."""
    outputs = [tuple(t.to(inputs["x"].dtype) for t in SPEC.OPS["forward"].reference(inputs)) for inputs in input_sets]
    result = {
        "outputs": outputs,
        "output_devices": [(case.device,) for _ in input_sets],
        "inputs_after": {k: v for k, v in input_sets[-1].items() if isinstance(v, torch.Tensor)},
        "ops": [],
        "kernels": [],
    }
    return with_fresh_call_data(case, result)


class FakeSandbox:
    """Hands out folders and answers runs with a canned (exit code, log), recording them."""

    def __init__(self, answer=(0, "")):
        self.answer, self.runs = answer, []

    def folder(self, parent: str, prefix: str) -> str:
        return tempfile.mkdtemp(prefix=prefix, dir=parent)

    def give(self, path: str) -> None:
        pass

    def seen_as(self, path: str) -> str:
        return path

    def run(self, command, **options):
        self.runs.append((command, options))
        return self.answer


def _grading(tmp_path, sandbox=None, unit=UNIT) -> Grading:
    deadline = Deadline(600)
    return Grading(
        unit,
        seed=3,
        folder=str(tmp_path),
        sandbox=sandbox or FakeSandbox(),
        env={"PYTHONPATH": "/course"},
        deadline=deadline,
        capability=None,
        gpus=0,
        gpu_lock=None,
        case_timeout=None,
        baselines=Baselines(unit, ChildSetting(sandbox, str(tmp_path), {}, deadline)),
    )


# plan


def test_the_plan_runs_a_devices_correctness_groups_in_one_child_and_perf_last():
    plan = plan_cases(SPEC, (), has_gpu=False, gpus=0)
    assert [g.name for g in plan.groups] == ["cpu", "cuda"]
    cpu, cuda = plan.groups
    assert {c.group for _, c in cpu.cases} == {"cpu_values", "cpu_gradients", "cpu_errors", "cpu_checks"}
    assert cpu.not_run == "" and cuda.not_run == "not run: no GPU on the grading machine"
    assert not plan.times_perf  # day01 has no perf case
    with_perf = plan_cases(_spec("cpu_fp64_small", "cuda_fp32_small", extra=(PERF,)), (), has_gpu=False, gpus=0)
    assert [g.name for g in with_perf.groups] == ["cpu", "cuda", "cpu_perf"] and with_perf.times_perf


def test_the_plan_keeps_the_cases_asked_for_and_marks_gpus_the_machine_lacks():
    plan = plan_cases(SPEC, ("cpu_fp32_*", "error_bias_shape"), has_gpu=True, gpus=1)
    (group,) = plan.groups
    assert [c.name for _, c in group.cases] == [n for n in CASES if n.startswith("cpu_fp32_")] + ["error_bias_shape"]
    assert all(SPEC.CASES[i] is c for i, c in group.cases)  # indices into the whole suite
    second = Case("cuda1_values", "cuda1", device="cuda:1")
    plan = plan_cases(_spec("cuda_fp32_small", extra=(second,)), (), has_gpu=True, gpus=1)
    assert [g.not_run for g in plan.groups] == [
        "",
        "not run: needs cuda:1, and the grading machine shows 1 GPU(s); its points are left out of the total",
    ]
    assert plan.uncounted == {1}  # the machine's lack, not the student's: worth nothing here
    assert not plan_cases(_spec("cuda_fp32_small"), (), has_gpu=False, gpus=0).uncounted  # a CPU preview


def test_a_case_the_gpu_has_too_little_memory_for_is_not_run_nor_counted():
    """As a case on a GPU the machine lacks, it is reported not run, with why; its points are left
    out of the total, so a machine too small costs the student nothing."""
    large = Case("cuda_large", "cuda_values", device="cuda", points=2.0, params=dict(shape=(2**20, 1024)))
    assert large.gpu_memory == 8 * 2**30  # its x and an output of its size, in float32
    declared = Case("cuda_declared", "cuda_values", device="cuda", gpu_bytes=20 * 2**30)
    spec = _spec("cuda_fp32_small", "cpu_fp64_small", extra=(large, declared))
    t4 = plan_cases(spec, (), has_gpu=True, gpus=1, gpu_free_bytes=14 * 2**30)
    run_here = [[c.name for _, c in g.cases] for g in t4.groups if not g.not_run]
    assert run_here == [["cpu_fp64_small"], ["cuda_fp32_small", "cuda_large"]]
    (skipped,) = [g for g in t4.groups if g.not_run]
    assert skipped.cases == [(3, declared)] and not skipped.counted and t4.uncounted == {3}
    assert skipped.not_run == (
        "not run: needs 20.0 GiB of GPU memory, and the grading machine's GPU has 14.0 GiB free; "
        "its points are left out of the total"
    )
    assert all(not g.not_run for g in plan_cases(spec, (), True, 1, gpu_free_bytes=80 * 2**30).groups)
    assert all(not g.not_run for g in plan_cases(spec, (), True, 1).groups)  # free memory not known: all run
    result = Grade(UNIT.name)
    report_cases(result, t4, Ran({0: Verdict(True), 3: Verdict(False, skipped.not_run)}, {}), set())
    entry = next(t for t in result.tests if t.name == "cuda_declared")
    assert entry.not_run and entry.max_score == 0 and entry.score == 0


def test_a_plan_refuses_a_case_that_needs_an_unknown_one():
    broken = Case("cpu_perf", "cpu_perf", kind="perf", needs=("cpu_misspelt",))
    with pytest.raises(ValueError, match="cpu_perf needs unknown case"):
        plan_cases(_spec("cpu_fp64_small", extra=(broken,)), (), has_gpu=False, gpus=0)


# read and build


def test_a_submission_without_the_units_files_is_not_built(tmp_path):
    (tmp_path / "empty").mkdir()
    (tmp_path / "work").mkdir()
    sandbox = FakeSandbox()
    grading = _grading(tmp_path / "work", sandbox)
    sources = read_submission(str(tmp_path / "empty"), grading)
    assert sources.problem.startswith("missing from the submission: ") and UNIT.sources[0] in sources.problem
    build = build_sources(sources, grading, timeout=60)
    assert build.built is None and not build.test.passed and build.test.output == sources.problem
    unreadable = read_submission(str(tmp_path / "nothing_here.zip"), grading)
    assert unreadable.problem.startswith("the submission could not be read")
    assert sandbox.runs == []  # no build was started


def test_a_build_the_sandbox_stopped_says_so(tmp_path):
    UNIT.write("solution", str(tmp_path / "solution"))
    sources = read_submission(str(tmp_path / "solution"), _grading(tmp_path))
    assert sources.problem == ""
    build = build_sources(sources, _grading(tmp_path, FakeSandbox((None, ""))), timeout=60)
    assert build.built is None and build.test.output == "the build took longer than 60 s and was stopped"


def test_a_first_step_that_kept_no_build_leaves_the_grading_to_build(tmp_path):
    assert first_step_build(str(tmp_path), _grading(tmp_path)) is None


# run and judge


class FakeRunner:
    """Stands for autograder.runner.GroupRunner: answers each case from the reference, but
    for the ones in CRASHED."""

    CRASHED = {"cpu_fp64_small": "the test process was killed by SIGSEGV"}
    calls: list = []

    def __init__(self, load, sandbox, work, env, deadline, **options):
        self.case_seconds, self.spawn_seconds, self.lock_wait_seconds = {}, [], 0.0

    def run(self, group, device, cases, inputs):
        FakeRunner.calls.append((group, [c.name for _, c in cases]))
        self.spawn_seconds.append(0.5)
        self.case_seconds.update({index: 0.25 for index, _ in cases})
        return {index: self.CRASHED.get(case.name) or _honest(case, inputs[index]) for index, case in cases}


def test_a_run_judges_each_group_and_skips_what_cannot_run(tmp_path, monkeypatch):
    monkeypatch.setattr(run_stage, "GroupRunner", FakeRunner)
    FakeRunner.calls = []
    spec = _spec("cpu_fp64_small", "cpu_fp32_tail", "cuda_fp32_small", extra=(PERF,))
    plan = plan_cases(spec, (), has_gpu=False, gpus=0)
    build = Build(results.TestResult("build", 1.0, True, "compiled"), Built(), str(tmp_path), str(tmp_path))
    timings = {}
    ran = run_cases(plan, build, _grading(tmp_path), timings)
    # the perf case never ran; the others are handed over in the grading's secret order
    cpu = secret_order([(0, CASES["cpu_fp64_small"]), (1, CASES["cpu_fp32_tail"])], 3)
    assert FakeRunner.calls == [("cpu", [case.name for _, case in cpu])]
    assert ran.verdicts[0] == Verdict(False, FakeRunner.CRASHED["cpu_fp64_small"])
    assert ran.verdicts[1].passed, ran.verdicts[1]
    assert ran.verdicts[2] == Verdict(False, "not run: no GPU on the grading machine")
    assert ran.verdicts[3] == Verdict(False, "not timed: cpu_fp64_small must pass first")
    assert ran.seconds == {0: 0.25, 1: 0.25}
    assert {"inputs_s", "runs_s", "judging_s", "tests_s"} <= set(timings) and timings["children"] == 1.0
    assert "reference_build_s" not in timings  # no perf case ran: the reference was never fetched


def test_after_a_failed_build_no_case_runs(tmp_path, monkeypatch):
    monkeypatch.setattr(run_stage, "GroupRunner", FakeRunner)
    FakeRunner.calls = []
    plan = plan_cases(_spec("cpu_fp64_small", "cuda_fp32_small"), (), has_gpu=False, gpus=0)
    build = Build(results.TestResult("build", 1.0, False, "error"), None, str(tmp_path), str(tmp_path))
    ran = run_cases(plan, build, _grading(tmp_path), {})
    assert FakeRunner.calls == []
    assert list(ran.verdicts.values()) == [Verdict(False, "not run: the build failed")] * 2


def test_the_judge_takes_each_raw_result_on_its_own():
    names = ("cpu_fp64_small", "cpu_fp32_tail", "cpu_fp16_small")
    cases = [(i, CASES[n]) for i, n in enumerate(names)]
    inputs = {i: make_input_sets(SPEC, c, seed=1) for i, c in cases}
    wrong = _honest(CASES["cpu_fp32_tail"], inputs[1])
    wrong["outputs"] = [tuple(t + 1 for t in out) for out in wrong["outputs"]]
    outcomes = {0: _honest(CASES["cpu_fp64_small"], inputs[0]), 1: wrong, 2: {"outputs": "forged"}}
    verdicts = judge_group(SPEC, cases, inputs, outcomes, {}, frozenset())
    assert verdicts[0].passed and not verdicts[1].passed and not verdicts[2].passed
    assert verdicts[2].message.startswith("the test process returned a malformed result"), verdicts[2].message
    timed_out = judge_group(SPEC, cases[:1], inputs, {0: "timed out after 30 s"}, {}, frozenset())
    assert timed_out[0] == Verdict(False, "timed out after 30 s")


# report and extras


def test_the_report_lists_the_cases_judged_in_the_suites_order():
    spec = _spec("cpu_fp64_small", "cpu_fp32_tail", "cuda_fp32_small", extra=(PERF,))
    plan = plan_cases(spec, (), has_gpu=False, gpus=0)
    measured = Verdict(True, "as fast as the reference", fraction=0.5, measurements={"ratio": 0.7})
    ran = Ran({3: measured, 2: Verdict(False, "not run: no GPU on the grading machine"), 0: Verdict(True)}, {0: 1.5})
    result = Grade(UNIT.name)
    report_cases(result, plan, ran, public_case_names(UNIT))
    assert [t.name for t in result.tests] == ["cpu_fp64_small", "cuda_fp32_small", "cpu_perf"]
    first, gpu, perf = result.tests
    assert first.visibility == "visible" and first.seconds == 1.5 and first.tags == ("cpu_values", "cpu")
    assert gpu.not_run and not perf.not_run and perf.visibility == "after_published"
    assert perf.fraction == 0.5 and result.perf == {"cpu_perf": {"ratio": 0.7}}


def test_written_answers_follow_the_cases_and_own_tests_need_a_package(tmp_path):
    (tmp_path / "tests").mkdir()  # a jit unit's tests/ folder is not a package's own tests
    sandbox = FakeSandbox()
    build = Build(results.TestResult("build", 1.0, True, ""), Built(), str(tmp_path), str(tmp_path), {})
    assert extras(build, _grading(tmp_path, sandbox), own_tests=True) == [] and sandbox.runs == []
    first = questions(UNIT)[0].id
    answered = Build(build.test, Built(), str(tmp_path), str(tmp_path), {first: "because"})
    entries = extras(answered, _grading(tmp_path, sandbox), own_tests=True)
    assert [e.name for e in entries] == [f"written_{q.id}" for q in questions(UNIT)] and sandbox.runs == []


def test_a_packages_own_tests_are_reported_with_their_failures(tmp_path):
    log = "..F\nFAILED tests/test_op.py::test_big - assert 1 == 2\n1 failed, 2 passed in 0.10s\n"
    sandbox = FakeSandbox((1, log))
    built = Built(prefix="/installed")
    build = Build(results.TestResult("build", 1.0, True, ""), built, str(tmp_path), str(tmp_path / "src"))
    test = run_own_tests(build, _grading(tmp_path, sandbox))
    assert not test.passed and test.max_score == 0 and not test.not_run
    assert test.output.splitlines() == [
        "your tests/ (reported, not graded): 1 failed, 2 passed in 0.10s",
        "FAILED tests/test_op.py::test_big - assert 1 == 2",
    ]
    ((command, options),) = sandbox.runs
    assert command[-1] == os.path.join(str(tmp_path / "src"), "tests")
    assert options["env"]["PYTHONPATH"] == os.pathsep.join(["/installed", "/course"])
    stopped = run_own_tests(build, _grading(tmp_path, FakeSandbox((None, "..."))))
    assert stopped.output.startswith("your tests/ (reported, not graded): stopped after")
    missing = run_own_tests(build, _grading(tmp_path, FakeSandbox((1, "No module named pytest"))))
    assert missing.not_run and "pytest is not installed" in missing.output


# options and the machine


@pytest.mark.parametrize(
    "options, words",
    [
        (dict(tests="cpu_*"), "tests must be a tuple of fnmatch patterns"),
        (dict(sandbox_mode="docker"), "sandbox_mode must be one of auto, bwrap, uid, none"),
        (dict(time_limit=0), "time_limit must be a positive number of seconds"),
        (dict(case_timeout=-1.0), "case_timeout must be a positive number of seconds"),
        (dict(seed="7"), "seed must be an int or None"),
    ],
)
def test_bad_options_are_refused_by_name(options, words):
    with pytest.raises((TypeError, ValueError), match=words):
        GradeOptions(**options)


def test_options_take_a_list_of_patterns_and_grade_takes_only_options(tmp_path):
    assert GradeOptions(tests=["cpu_*"]).tests == ("cpu_*",)
    with pytest.raises(TypeError, match="options must be a GradeOptions, not dict"):
        grade(str(tmp_path), UNIT, {"seed": 3})


def test_the_childrens_environment_leaves_out_the_graders_own_settings(monkeypatch):
    monkeypatch.setenv("GRADER_SECRET", "x")
    monkeypatch.setenv("PYTHONPATH", "/elsewhere")
    env = child_env("9.0")
    assert "GRADER_SECRET" not in env and env["PYTHONUNBUFFERED"] == "1"
    repo = os.path.dirname(os.path.dirname(os.path.abspath(autograder.__file__)))
    assert env["PYTHONPATH"].split(os.pathsep) == [repo, "/elsewhere"]
    gpu_perf = Case("p", "g", device="cuda", kind="perf")
    assert perf_runs_here([gpu_perf], has_gpu=True) and not perf_runs_here([gpu_perf], has_gpu=False)
    assert perf_runs_here([PERF], has_gpu=False) and not perf_runs_here([CASES["cpu_fp64_small"]], has_gpu=True)


def test_the_probe_of_the_gpus_tells_the_first_ones_memory(monkeypatch):
    """grade-all's answer for a grading's GPUs carries the first one's free and total memory,
    which the plan reads; an answer without them leaves the memory unknown."""
    from autograder import machine

    answer = machine.Gpus("7.5", 1, 14 * 2**30, 15 * 2**30)
    probed = types.SimpleNamespace(stdout=f"7.5 1 {answer.free_bytes} {answer.total_bytes}\n")
    monkeypatch.setattr(machine.subprocess, "run", lambda *args, **options: probed)
    machine.gpus_of.cache_clear()
    try:
        env = machine.gpu_probe_env("t4")
        machine.gpus_of.cache_clear()
        monkeypatch.setattr(machine.subprocess, "run", None)  # no second probe: the answer is handed over
        monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "t4")
        monkeypatch.setenv(machine.GPU_PROBE_ENV, env[machine.GPU_PROBE_ENV])
        assert machine.gpus_of("t4") == answer and machine.gpu_free_bytes() == 14 * 2**30
        monkeypatch.setenv(machine.GPU_PROBE_ENV, '["t4", "7.5", 1]')
        machine.gpus_of.cache_clear()
        assert machine.gpus_of("t4") == machine.Gpus("7.5", 1) and machine.gpu_free_bytes() is None
    finally:
        machine.gpus_of.cache_clear()

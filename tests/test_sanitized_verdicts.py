"""The graded sanitizer cases' verdicts come from the tool's exit code: a stand-in for
compute-sanitizer, on a machine without a GPU, exits as the real one would."""

import stat
import sys

import pytest
import torch
from helpers import sample_class_problems

from autograder import sanitized
from autograder.deadline import Deadline
from autograder.machine import child_env
from autograder.sandbox import Sandbox
from course.judge import Verdict
from course.sanitize import ERROR_EXIT, SANITIZER
from course.spec import mutants, units

UNIT = units.load("day04_layernorm_edge_cases")
SPEC = UNIT.tests()
CASES = [(index, case) for index, case in enumerate(SPEC.CASES) if case.kind == SANITIZER]
# The child's folder is the last argument: a run that completes answers each case the runner
# hands over, as a child does (autograder/runner.py, GroupFiles), with a result the test saves
# beforehand.
_ANSWER = (
    "import shutil, sys; from autograder.runner import GroupFiles; files = GroupFiles(sys.argv[-1]); "
    "open(files.ready, 'w').close(); [shutil.copy(sys.argv[1], case.result) for case in iter(files.take, None)]"
)
_RESULTS = f'{sys.executable} -c "{_ANSWER}" KEPT "$(eval echo \\${{$#}})"\n'
COMPLETE = _RESULTS.replace("KEPT", "ran.pt")
RAISED = _RESULTS.replace("KEPT", "raised.pt")


def _judged_by_its_kind(case, inputs, outcome):
    """The stand-in's results: right where the op ran, wrong where it raised (the grader judges
    real ones against the reference)."""
    if isinstance(outcome, dict) and "exception" in outcome:
        return Verdict(False, outcome["exception"])
    return Verdict(isinstance(outcome, dict), "" if isinstance(outcome, dict) else outcome)


def _verdicts(tmp_path, monkeypatch, script):
    torch.save({"outputs": ()}, tmp_path / "ran.pt")
    torch.save({"exception": "RuntimeError: TODO(day04): ..."}, tmp_path / "raised.pt")
    tool = tmp_path / "fake-sanitizer"
    tool.write_text(
        "#!/bin/sh\n"
        + script.replace("ran.pt", str(tmp_path / "ran.pt")).replace("raised.pt", str(tmp_path / "raised.pt"))
    )
    tool.chmod(tool.stat().st_mode | stat.S_IEXEC)
    monkeypatch.setattr(sanitized, "find_sanitizer", lambda: str(tool))
    env = child_env(None)
    sandbox = Sandbox.open("none", str(tmp_path), env=env)
    load = {
        "solutions": UNIT.solutions,
        "unit": UNIT.name,
        "plan": UNIT.plan().to_json(),
        "built": None,
        "source_dir": str(tmp_path),
    }
    args = dict(load=load, sandbox=sandbox, work=str(tmp_path), env=env, deadline=Deadline(300), shared=())
    try:
        verdicts, seconds = sanitized.sanitized_verdicts(SPEC, CASES, args, 1, _judged_by_its_kind)
        assert seconds.keys() == verdicts.keys() and all(s > 0 for s in seconds.values())  # each tool run timed
        return {SPEC.CASES[i].name: v for i, v in verdicts.items()}
    finally:
        sandbox.close()


def test_a_clean_exit_after_every_case_passes(tmp_path, monkeypatch):
    verdicts = _verdicts(tmp_path, monkeypatch, COMPLETE + "exit 0\n")
    tools = {"cuda_memcheck", "cuda_racecheck", "cuda_initcheck"}
    assert all(v.passed for v in verdicts.values()) and set(verdicts) == tools


def test_an_op_that_raised_on_its_cases_gets_no_points_for_a_clean_report(tmp_path, monkeypatch):
    verdicts = _verdicts(tmp_path, monkeypatch, RAISED + "exit 0\n")
    assert all(
        not v.passed and "nothing to vouch for" in v.message and "TODO(day04)" in v.message for v in verdicts.values()
    ), verdicts


def test_the_tool_s_error_exit_fails_with_its_report(tmp_path, monkeypatch):
    report = "echo '========= Invalid __global__ read of size 4 bytes'\n"
    verdicts = _verdicts(tmp_path, monkeypatch, COMPLETE + report + f"exit {ERROR_EXIT}\n")
    assert not any(v.passed for v in verdicts.values())
    assert all("Invalid __global__ read" in v.message and "reported errors" in v.message for v in verdicts.values())


@pytest.mark.parametrize(
    "script",
    ["exit 0\n", COMPLETE + "kill -9 $$\n", COMPLETE + "exit 3\n"],
    ids=["clean_exit_with_cases_missing", "killed", "other_exit"],
)
def test_a_run_that_did_not_finish_fails(tmp_path, monkeypatch, script):
    verdicts = _verdicts(tmp_path, monkeypatch, script)
    assert all(not v.passed and "did not finish" in v.message for v in verdicts.values()), verdicts


def test_without_the_tool_the_cases_are_not_run(tmp_path, monkeypatch):
    monkeypatch.setattr(sanitized, "find_sanitizer", lambda: None)
    verdicts, seconds = sanitized.sanitized_verdicts(SPEC, CASES, {}, 1, _judged_by_its_kind)
    assert all(v.message.startswith("not run: compute-sanitizer") for v in verdicts.values()) and seconds == {}


def test_a_case_lost_on_a_small_input_costs_the_sanitizer_cases_that_run_it(tmp_path, monkeypatch):
    """Under its tool, a wrong small case leaves nothing to vouch for: the class check expects
    those sanitizer cases lost too, where a mutant's `loses` does not list them."""
    memcheck = next(case for _, case in CASES if case.params["tool"] == "memcheck")
    small = sanitized.cases_run_under(SPEC, memcheck)
    assert small and all(case.kind == "values" and case.device.startswith("cuda") for _, case in small)
    sanitizer_names = {case.name for _, case in CASES}
    assert sanitized.lost_with(SPEC, {small[0][1].name}) <= sanitizer_names
    assert memcheck.name in sanitized.lost_with(SPEC, {small[0][1].name})
    assert sanitized.lost_with(SPEC, {"cpu_fwd_fp32"}) == set()

    names = [case.name for case in SPEC.CASES]
    wrong_small = mutants.Mutant("wrong_small", "", (small[0][1].name,), (), (), True)
    monkeypatch.setattr(mutants, "load", lambda unit: {"wrong_small": wrong_small})

    def checked(lost: set[str]) -> list[str]:
        return sample_class_problems(UNIT, str(tmp_path), "wrong_small_0", names, lost)

    assert checked({small[0][1].name} | sanitized.lost_with(SPEC, {small[0][1].name})) == []
    assert "kept" in checked({small[0][1].name})[0]

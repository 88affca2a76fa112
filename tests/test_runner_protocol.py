"""The file protocol between the runner and a child (autograder/runner.py, GroupFiles), held
against stand-ins for the child that follow it, or break it, on the CPU: no build, no student
code. A stand-in runs in the child's place (the runner's `wrapper`) with the child's folder as
its last argument."""

import json
import sys

import pytest

from autograder.deadline import Deadline
from autograder.machine import child_env
from autograder.runner import GroupRunner, secret_order
from autograder.sandbox import Sandbox
from course.cases import Case, make_input_sets
from course.spec import units

UNIT = units.load("day01_relu_bias")
SPEC = UNIT.tests()
CASES = [(i, c) for i, c in enumerate(SPEC.CASES) if c.device == "cpu" and c.kind == "values"][:4]

_PRELUDE = """\
import json, os, sys, time
import torch
from autograder.runner import GroupFiles
files = GroupFiles(sys.argv[-1])
"""


def _run(tmp_path, body: str, cases=CASES, timeout: float = 60) -> tuple[GroupRunner, dict]:
    """The runner's outcomes for `cases`, handed to a stand-in child that runs `body` (after
    _PRELUDE: `files` is its GroupFiles)."""
    script = tmp_path / "stand_in.py"
    script.write_text(f"#!{sys.executable}\n{_PRELUDE}{body}")
    script.chmod(0o755)
    env = child_env(None)
    sandbox = Sandbox.open("none", str(tmp_path), env=env)
    load = {"solutions": UNIT.solutions, "unit": UNIT.name, "built": None}
    runner = GroupRunner(
        load, sandbox, str(tmp_path), env, Deadline(120), prefix="run_", wrapper=(str(script),), case_timeout=timeout
    )
    try:
        inputs = {index: make_input_sets(SPEC, case, 1) for index, case in cases}
        return runner, runner.run("cpu", "cpu", cases, inputs)
    finally:
        sandbox.close()


def test_a_child_learns_each_case_only_when_handed_it_and_never_its_name(tmp_path):
    """At load, the child's folder holds no case; each case comes alone, without its name, in the
    order the runner was given; the request names none."""
    seen = tmp_path / "seen.json"
    body = f"""
request = json.load(open(files.request))
at_load = sorted(os.listdir(files.folder))
open(files.ready, "w").close()
handed = []
while (case := files.take()) is not None:
    data = torch.load(case.case, weights_only=False)
    handed.append([data["name"], data["group"], data["params"]["shape"], sorted(os.listdir(files.folder))])
    torch.save({{"exception": "handed " + str(len(handed))}}, case.result)
json.dump({{"request": request, "at_load": at_load, "handed": handed}}, open({str(seen)!r}, "w"), default=str)
"""
    runner, outcomes = _run(tmp_path, body)
    record = json.loads(seen.read_text())
    assert outcomes == {index: {"exception": f"handed {n + 1}"} for n, (index, _) in enumerate(CASES)}
    assert "cases" not in record["request"] and not any(c.name in json.dumps(record["request"]) for _, c in CASES)
    assert [name for name in record["at_load"] if name.endswith(".pt")] == []
    assert [(name, group) for name, group, _, _ in record["handed"]] == [("", "")] * len(CASES)
    assert [shape for _, _, shape, _ in record["handed"]] == [list(c.params["shape"]) for _, c in CASES]
    for number, (_, _, _, listing) in enumerate(record["handed"]):  # this case's files and the earlier ones' only
        assert len([name for name in listing if name.endswith(".inputs.pt")]) == number + 1
    assert set(runner.case_seconds) == {index for index, _ in CASES}


def test_results_the_runner_did_not_hand_out_count_for_nothing(tmp_path):
    """An extension that, at load, writes a right-looking result under every name the old
    protocol used (`<i>.result.pt`, beside any `<i>.inputs.pt`) and exits: nothing is taken."""
    body = """
for index in range(200):
    torch.save({"outputs": [], "forged": index}, os.path.join(files.folder, f"{index}.result.pt"))
for name in os.listdir(files.folder):
    if name.endswith(".inputs.pt"):
        torch.save({"forged": name}, os.path.join(files.folder, name.replace(".inputs.pt", ".result.pt")))
sys.exit(0)
"""
    _, outcomes = _run(tmp_path, body)
    assert set(outcomes) == {index for index, _ in CASES}
    assert all(isinstance(o, str) and "exited with code 0 while loading the module" in o for o in outcomes.values())


def test_a_result_is_taken_once_and_only_for_the_case_in_hand(tmp_path):
    """A child that rewrites each result once the next case is handed over, writes results
    under names of its own and for the case it is about to be handed: the first result of each
    case handed is the one taken."""
    body = """
open(files.ready, "w").close()
last = None
while True:
    for name in range(5):  # guesses at the next case's files
        torch.save({"forged": "guess"}, os.path.join(files.folder, f"guess{name}.result.pt"))
    case = files.take()
    if last is not None:
        torch.save({"forged": "rewritten"}, last.result)
    if case is None:
        break
    torch.save({"exception": "first"}, case.result)
    last = case
time.sleep(0.3)  # the runner's last look at the folder comes after the rewrite
"""
    _, outcomes = _run(tmp_path, body)
    assert outcomes == {index: {"exception": "first"} for index, _ in CASES}


def test_a_disk_too_full_for_a_cases_inputs_costs_that_case_only(tmp_path, monkeypatch):
    """torch.save's short write (a disk a child could fill) while the runner hands a case over
    fails that case, with why; the grading goes on to the next."""
    import autograder.runner as runner_module

    saves, save = [], runner_module.torch.save

    def short_on_the_second_inputs(data, handle):
        saves.append(handle.name)
        if handle.name.endswith(".inputs.pt") and sum(n.endswith(".inputs.pt") for n in saves) == 2:
            raise RuntimeError("[enforce fail at inline_container.cc:672] . unexpected pos 536888768 vs 536888720")
        save(data, handle)

    monkeypatch.setattr(runner_module.torch, "save", short_on_the_second_inputs)
    body = """
open(files.ready, "w").close()
while (case := files.take()) is not None:
    torch.save({"exception": "ran"}, case.result)
"""
    _, outcomes = _run(tmp_path, body, cases=CASES[:3])
    first, second, third = (outcomes[index] for index, _ in CASES[:3])
    assert first == third == {"exception": "ran"}, outcomes
    assert "the grader could not write this test's inputs" in second and "unexpected pos" in second, second


def test_a_child_that_never_starts_its_case_is_stopped_without_blame(tmp_path):
    """A child that takes a case and does nothing: the case's time limit ends it, and the case,
    never seen started, is not blamed (a fresh child would fail the same way)."""
    body = """
open(files.ready, "w").close()
files.take()
time.sleep(600)
"""
    _, outcomes = _run(tmp_path, body, cases=CASES[:2], timeout=1)
    assert all("stopped between tests for 1 s" in o for o in outcomes.values()), outcomes


def test_the_order_of_a_groups_cases_is_drawn_from_the_gradings_seed():
    cases = [(i, Case(f"case_{i}", "g")) for i in range(12)]
    orders = {seed: [i for i, _ in secret_order(cases, seed)] for seed in range(5)}
    assert all(sorted(order) == list(range(12)) for order in orders.values())
    assert len({tuple(order) for order in orders.values()}) == 5  # 12! orders: five seeds, five orders
    assert secret_order(cases, 3) == secret_order(list(reversed(cases)), 3)  # the seed decides, not the input order


@pytest.mark.parametrize("field", ["name", "group", "note", "hint"])
def test_a_case_reaches_the_child_without_what_names_it(field):
    from autograder.runner import runnable_case

    case = Case("cuda_fp32_large_mean", "cuda_values", note="ran in fp16", hint="subtract the mean")
    assert runnable_case(case)[field] == "" and runnable_case(case)["params"] == case.params

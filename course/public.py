"""Runs a unit's public cases in this process and prints what passed and why not."""

from __future__ import annotations

import random
import traceback

import torch

from course.cases import make_input_sets, needed
from course.dtypes import Toolchain, ToolchainSuite
from course.harness import execute
from course.judge import Verdict, judge, needs_not_met
from course.todos import Todo, functions_needed, needs_message, refusal, remaining_todos, waiting_on


def _failure(error: Exception) -> Verdict:
    message = f"{type(error).__name__}: {error}".strip()
    needs = refusal(message)
    if needs:  # the full list is printed once, above the results: name only what this case needs
        return Verdict(False, needs)
    message += "\n" + "".join(traceback.format_exception(error)[-3:-1]).rstrip()
    return Verdict(False, message)


def print_todos(folder: str, files: list[str]) -> None:
    todos = remaining_todos(folder, files)
    if todos:
        print(f"{len(todos)} TODO{'s' if len(todos) > 1 else ''} left, in order:")
        print("\n".join(f"  {todo}" for todo in todos))
        print()


def run_case(spec, ext, case, seed: int) -> Verdict:
    input_sets = make_input_sets(spec, case, seed)
    try:
        result = execute(spec, ext, case, input_sets)
    except Exception as error:
        return _failure(error)
    # The student's own machine: torch's op was timed right here, just before theirs.
    baseline = {"timing": result["torch_timing"]} if case.kind == "perf" and "timing" in result else None
    return judge(spec, case, input_sets, result, baseline)


def _outcome(spec, ext, case, seed: int, passed_names: set[str], todos: list[Todo]) -> tuple[str, Verdict]:
    """(status, verdict) of one case: TODO, without running it, while a function it needs is
    unwritten; FAIL while a case it needs has not passed; else PASS or FAIL as run."""
    waiting = waiting_on(functions_needed(spec, case), todos)
    if waiting:
        return "TODO", Verdict(False, needs_message(waiting))
    unmet = [name for name in needed(case, spec.CASES) if name not in passed_names]
    verdict = needs_not_met(case, unmet) if unmet else run_case(spec, ext, case, seed)
    return ("PASS" if verdict.passed else "FAIL"), verdict


def run_cases(
    spec,
    ext,
    seed: int | None = None,
    devices: tuple[str, ...] | None = None,
    toolchain: Toolchain | None = None,
    todos: list[Todo] = (),
) -> bool:
    """Run every case of `spec` on the devices available (perf cases last, once the cases
    they need passed), in the dtypes `toolchain` (this machine's when None) can compile for
    Triton (course/dtypes.py); a case whose functions (course/todos.py) are among the unwritten
    `todos` is reported as waiting on them, not run. Print a table; True when all pass."""
    seed = random.randrange(2**31) if seed is None else seed
    if devices is None:
        devices = ("cpu", "cuda") if torch.cuda.is_available() else ("cpu",)
    spec = ToolchainSuite(spec, Toolchain.here() if toolchain is None else toolchain)
    counts = {"PASS": 0, "FAIL": 0, "TODO": 0}
    passed_names: set[str] = set()
    for case in sorted(spec.CASES, key=lambda c: c.kind == "perf"):
        if case.device not in devices:
            print(f"  SKIP  {case.name}: no {case.device} device here")
            continue
        status, verdict = _outcome(spec, ext, case, seed, passed_names, list(todos))
        counts[status] += 1
        if verdict.passed:
            passed_names.add(case.name)
        print(f"  {status}  {case.name}")
        shown = [verdict.message] if not verdict.passed or verdict.fraction is not None else []  # perf: its timing
        lines = [line for text in [*shown, case.note] for line in text.splitlines()]
        if lines:
            print("\n".join("        " + line for line in lines))
    waiting = f", {counts['TODO']} wait on functions still to write" if counts["TODO"] else ""
    print(f"{counts['PASS']}/{sum(counts.values())} public tests passed{waiting} (seed {seed})")
    return counts["PASS"] == sum(counts.values())

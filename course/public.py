"""Runs a unit's public cases in this process and prints what passed and why not."""

from __future__ import annotations

import ast
import os
import random
import re
import traceback

import torch

from course.cases import make_input_sets, needed
from course.dtypes import Toolchain, ToolchainSuite
from course.harness import execute
from course.judge import Verdict, judge, needs_not_met

_TODO_LINE = re.compile(r"TODO\((day\d+)\): ([^:\n]+):")  # day, "file, function"


def _failure(error: Exception) -> Verdict:
    message = f"{type(error).__name__}: {error}".strip()
    todos = _TODO_LINE.findall(message)
    if todos:  # the full list is printed once, above the results: name only what blocks this case
        return Verdict(False, "blocked by " + "; ".join(f"TODO({day}): {where}" for day, where in todos))
    message += "\n" + "".join(traceback.format_exception(error)[-3:-1]).rstrip()
    return Verdict(False, message)


# A COURSE_TODO line of C++ (not one quoted in a comment).
_COURSE_TODO = re.compile(r'^\s*COURSE_TODO(?:_CPU|_CUDA)?\("(day\d+): ?([^"]*)"', re.MULTILINE)


def _python_todos(text: str) -> list[str]:
    """The messages of `raise NotImplementedError("TODO(dayNN): ...")` in Python source."""
    try:
        tree = ast.parse(text)
    except SyntaxError:
        return []
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Raise) and isinstance(node.exc, ast.Call) and node.exc.args:
            message = node.exc.args[0]
            if isinstance(message, ast.Constant) and str(message.value).startswith("TODO("):
                found.append((node.lineno, str(message.value)))
    return [message for _, message in sorted(found)]


def remaining_todos(folder: str, files: list[str]) -> list[str]:
    """Every TODO still in the unit's files, in the files' order: the C++ COURSE_TODO lines
    and the Python NotImplementedError("TODO(dayNN): ...") ones."""
    found = []
    for name in files:
        path = os.path.join(folder, name)
        if not os.path.exists(path):
            continue
        with open(path, encoding="utf-8", errors="replace") as handle:
            text = handle.read()
        if name.endswith(".py"):
            found += _python_todos(text)
        else:
            found += [f"TODO({day}): {what.strip()}" for day, what in _COURSE_TODO.findall(text)]
    return found


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


def run_cases(
    spec, ext, seed: int | None = None, devices: tuple[str, ...] | None = None, toolchain: Toolchain | None = None
) -> bool:
    """Run every case of `spec` on the devices available (perf cases last, once the cases
    they need passed), in the dtypes `toolchain` (this machine's when None) can compile for
    Triton (course/dtypes.py); print a table; True when all pass."""
    seed = random.randrange(2**31) if seed is None else seed
    if devices is None:
        devices = ("cpu", "cuda") if torch.cuda.is_available() else ("cpu",)
    spec = ToolchainSuite(spec, Toolchain.here() if toolchain is None else toolchain)
    passed = total = 0
    passed_names: set[str] = set()
    for case in sorted(spec.CASES, key=lambda c: c.kind == "perf"):
        if case.device not in devices:
            print(f"  SKIP  {case.name}: no {case.device} device here")
            continue
        unmet = [name for name in needed(case, spec.CASES) if name not in passed_names]
        verdict = needs_not_met(case, unmet) if unmet else run_case(spec, ext, case, seed)
        total += 1
        passed += verdict.passed
        if verdict.passed:
            passed_names.add(case.name)
        print(f"  {'PASS' if verdict.passed else 'FAIL'}  {case.name}")
        shown = [verdict.message] if not verdict.passed or verdict.fraction is not None else []  # perf: its timing
        lines = [line for text in [*shown, case.note] for line in text.splitlines()]
        if lines:
            print("\n".join("        " + line for line in lines))
    print(f"{passed}/{total} public tests passed (seed {seed})")
    return passed == total

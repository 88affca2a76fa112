"""Runs a unit's public cases in this process and prints what passed and why not."""
from __future__ import annotations

import random
import traceback

import torch

from course.cases import make_input_sets
from course.harness import execute
from course.judge import Verdict, judge


def run_case(spec, ext, case, seed: int) -> Verdict:
    input_sets = make_input_sets(spec, case, seed)
    try:
        result = execute(spec, ext, case, input_sets)
    except Exception as error:  # noqa: BLE001 - the op failing is a verdict, not a crash
        message = f"{type(error).__name__}: {error}".strip()
        if "TODO(" not in message:
            message += "\n" + "".join(traceback.format_exception(error)[-3:-1]).rstrip()
        return Verdict(False, message)
    return judge(spec, case, input_sets, result)


def run_public_tests(spec, ext, seed: int | None = None, devices: tuple[str, ...] | None = None) -> bool:
    """Run every case of `spec` on the devices available; print a table; True when all pass."""
    seed = random.randrange(2**31) if seed is None else seed
    if devices is None:
        devices = ("cpu", "cuda") if torch.cuda.is_available() else ("cpu",)
    passed = total = 0
    for case in spec.CASES:
        if case.device not in devices:
            print(f"  SKIP  {case.name}: no {case.device} device here")
            continue
        verdict = run_case(spec, ext, case, seed)
        total += 1
        passed += verdict.passed
        print(f"  {'PASS' if verdict.passed else 'FAIL'}  {case.name}")
        if not verdict.passed:
            print("\n".join("        " + line for line in verdict.message.splitlines()))
    print(f"{passed}/{total} public tests passed (seed {seed})")
    return passed == total

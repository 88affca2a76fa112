"""The debugging lab's one call: look for a bug in a unit's sources with the tool that finds it.

    find_bug(unit, files, "memcheck")                       compute-sanitizer over the public small GPU cases
    find_bug(unit, files, "tests", cases=["cuda_fwd_x"])    the named public cases, with their mismatch reports
    find_bug(unit, files, "gradcheck")                      the public suite's lab cases for that tool (LAB_CASES)
    find_bug(unit, files, "racecheck", plant={...})         the same on a copy with one bug planted

The op always runs in a child process: an illegal address ruins a CUDA context for good, and
the notebook's own must survive the bug it is hunting. With `plant` ({file, old, new}: the
edit that puts a bug back into correct sources), the instructor's notebook shows what each
of the starter's bugs looks like under its tool.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys

LAB_ROOT = "lab"  # planted copies and their builds
TESTS = "tests"
# Tools that are no sanitizer: the public suite runs them as cases of its own, LAB_CASES[tool],
# graded in the hidden suite alone.
SUITE_TOOLS = ("gradcheck",)


def _planted_copy(unit: str, files: list[str], plant: dict) -> str:
    """A copy of the unit's sources with `plant`'s edit made; returns its folder."""
    folder = os.path.join(LAB_ROOT, "planted", unit)
    shutil.rmtree(folder, ignore_errors=True)
    for file in files:
        os.makedirs(os.path.dirname(os.path.join(folder, file)), exist_ok=True)
        shutil.copyfile(os.path.join(unit, file), os.path.join(folder, file))
    path = os.path.join(folder, plant["file"])
    with open(path, encoding="utf-8") as handle:
        text = handle.read()
    if text.count(plant["old"]) != 1:
        raise ValueError(f"plant: {plant['file']} holds the code to replace {text.count(plant['old'])} times, not once")
    with open(path, "w", encoding="utf-8") as handle:
        handle.write(text.replace(plant["old"], plant["new"]))
    return folder


def find_bug(
    unit: str,
    files: list[str],
    tool: str,
    *,
    cases: list[str] = (),
    plant: dict | None = None,
    suites_root: str | None = None,
    timeout: float = 900,
) -> bool:
    """Run the unit's op (its sources in the folder named after it) under `tool`; print what
    the tool says. Returns True when it found something."""
    from course.build import Plan, build
    from course.notebook import BUILD_ROOT
    from course.sanitize import TOOLS, find_sanitizer, run_sanitizer
    from course.suites import import_suite, public_root

    if tool not in (*TOOLS, *SUITE_TOOLS, TESTS):
        raise ValueError(f"tool must be one of {', '.join((*TOOLS, *SUITE_TOOLS))} or {TESTS!r}, got {tool!r}")
    if tool == TESTS and not cases:
        raise ValueError("cases: name the public cases to run with tool 'tests'")
    import torch

    if not torch.cuda.is_available():
        print(f"no GPU here: {tool} looks at the GPU path (Runtime > Change runtime type > GPU)")
        return False
    suites_root = suites_root or public_root()
    plan = Plan(unit, files=tuple(files))
    source_dir, build_dir = unit, os.path.join(BUILD_ROOT, unit)
    if plant is not None:
        source_dir, build_dir = _planted_copy(unit, files, plant), os.path.join(LAB_ROOT, "build", unit)
    if tool in TOOLS:
        if find_sanitizer() is None:
            print(f"compute-sanitizer is not here: {tool} needs the CUDA toolkit's compute-sanitizer")
            return False
        report = run_sanitizer(tool, plan, source_dir, build_dir, suites_root, hidden=False, timeout=timeout)
        if report.errors:
            print(report.output)
        found = not report.clean
    else:
        cases = _cases_run(import_suite(suites_root, unit, hidden=False), tool, cases)
        built = build(plan, source_dir, build_dir)
        command = [sys.executable, "-m", "course.lab", plan.to_json(), source_dir, built.library, suites_root, *cases]
        run = subprocess.run(command, capture_output=True, text=True, timeout=timeout)
        print((run.stdout + run.stderr).rstrip())
        found = run.returncode != 0
    print(f"{tool}: {'found a bug' if found else 'found nothing'}")
    return found


def _cases_run(spec, tool: str, cases) -> list[str]:
    """The names of the public cases `tool` runs: those named (tests), or the suite's lab cases."""
    if tool in SUITE_TOOLS:
        if not lab_cases(spec).get(tool):
            raise ValueError(f"{spec.__name__} has no LAB_CASES[{tool!r}] for the lab to run")
        return [case.name for case in lab_cases(spec)[tool]]
    known = [case.name for case in spec.CASES]
    unknown = [name for name in cases if name not in known]
    if unknown:
        raise ValueError(f"cases: no public case named {', '.join(unknown)}; there are {', '.join(known)}")
    return list(cases)


def lab_cases(spec) -> dict:
    """{tool: [Case]}: the cases a public suite runs only for the lab's tools (SUITE_TOOLS)."""
    return getattr(spec, "LAB_CASES", {})


def main(argv: list[str]) -> int:
    """In the child: load the build and judge the named public cases; exit 1 if any fails."""
    import random

    from course.build import Built, Plan
    from course.loading import load
    from course.public import run_case
    from course.suites import import_suite

    plan_json, source_dir, library, suites_root, *names = argv
    plan = Plan.from_json(plan_json)
    module = load(plan, Built(library=library), source_dir)
    spec = import_suite(suites_root, plan.name, hidden=False)
    known = {case.name: case for case in [*spec.CASES, *(c for cases in lab_cases(spec).values() for c in cases)]}
    seed, failed = random.randrange(2**31), 0
    for name in names:
        verdict = run_case(spec, module, known[name], seed)
        failed += not verdict.passed
        print(f"  {'PASS' if verdict.passed else 'FAIL'}  {name}")
        if not verdict.passed:
            print("\n".join("        " + line for line in verdict.message.splitlines()))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))

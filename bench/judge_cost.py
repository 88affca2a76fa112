"""What the grader's parent spends on one input set of each perf case, on the host: making the
set, computing the float64 reference, its tolerances, and comparing an answer to it. A perf
case's set has 10^8 elements, and the parent judges each set of the timed calls and, on a GPU,
the first set twice more (autograder/timed_kernels.py), so these seconds add up per grading.

    python bench/judge_cost.py [UNIT ...] [--seed 7] [--groups] [--slice N]

--groups: instead, each perf group's input sets made one case after another and, as the
grader makes them (autograder/stages/run.py), side by side. --slice N: compare N elements at a time
instead of course.judge.SLICE, to weigh that choice (run two of these at once to see it beside
another busy process).

The answer compared is the reference itself, rounded to the output dtypes: an honest op's, so
the comparison takes the path a passing case takes. No GPU needed.
"""

import argparse
import os
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

import torch

from autograder.stages.run import input_sets_of
from course import judge
from course.cases import generator_for, make_input_sets
from course.judge import _values_problems
from course.ops import op_for
from course.spec.units import all_units


def _seconds(work):
    start = time.perf_counter()
    result = work()
    return time.perf_counter() - start, result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    known = {unit.name: unit for unit in all_units()}
    parser.add_argument("units", nargs="*", help="default: every unit with perf cases")
    parser.add_argument("--seed", type=int, default=7)
    parser.add_argument(
        "--groups", action="store_true", help="time making each perf group's sets, alone and side by side"
    )
    parser.add_argument("--slice", type=int, default=judge.SLICE, help="elements compared at a time")
    args = parser.parse_args()
    if args.slice < 1:
        parser.error(f"--slice must be at least 1, got {args.slice}")
    judge.SLICE = args.slice
    unknown = [name for name in args.units if name not in known]
    if unknown:
        parser.error(f"unknown unit(s) {', '.join(unknown)}; the units are {', '.join(known)}")
    print(f"torch {torch.__version__}, {torch.get_num_threads()} threads, {judge.SLICE} elements compared at a time")
    if args.groups:
        _groups([known[name] for name in args.units] or list(known.values()), args.seed)
        return
    print("| unit | case | elements | inputs s | reference s | tolerances s | judged s (all of it) |")
    print("|---|---|---:|---:|---:|---:|---:|")
    for unit in [known[name] for name in args.units] or known.values():
        name, spec = unit.name, unit.tests(hidden=True)
        for case in spec.CASES:
            if case.kind != "perf":
                continue
            make_s, inputs = _seconds(lambda: spec.make_inputs(case, generator_for(case, args.seed)))
            op = op_for(spec, inputs)
            reference_s, expected = _seconds(lambda: op.reference(inputs))
            tolerances_s, _ = _seconds(lambda: op.tolerances(inputs))
            answer = tuple(e.to(dtype) for e, dtype in zip(expected, op.dtypes(inputs)))
            del expected
            judged_s, problems = _seconds(lambda: _values_problems(spec, inputs, answer))
            if problems:  # the reference rounded to its dtypes must pass, or the timing means nothing
                raise SystemExit(f"{name} {case.name}: {problems}")
            print(
                f"| {name} | {case.name} | {case.elements} | {make_s:.2f} | {reference_s:.2f} | "
                f"{tolerances_s:.2f} | {judged_s:.2f} |",
                flush=True,
            )


def _groups(units: list, seed: int) -> None:
    print("| unit | perf group | cases | sets one case after another, s | side by side, s |")
    print("|---|---|---:|---:|---:|")
    for unit in units:
        spec, groups = unit.tests(hidden=True), {}
        for index, case in enumerate(spec.CASES):
            if case.kind == "perf":
                groups.setdefault(case.group, []).append((index, case))
        for group, cases in groups.items():
            alone_s, made = _seconds(lambda: [make_input_sets(spec, case, seed) for _, case in cases])
            del made
            together_s, made = _seconds(lambda: input_sets_of(spec, cases, seed))
            del made
            print(f"| {unit.name} | {group} | {len(cases)} | {alone_s:.1f} | {together_s:.1f} |", flush=True)


if __name__ == "__main__":
    main()

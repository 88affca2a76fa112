"""A unit's perf cases, timed as a grading times them: the reference solution against what the
suite measures it against, in GB/s from the suite's own byte counts.

    python bench/unit.py UNIT [--list] [--sweep D [D ...]] [--seed N] [--markdown FILE]

Everything comes from the unit's suite (solutions/UNIT/public_tests.py and hidden_tests.py):
each perf case's inputs (`make_inputs`), torch's op it is measured against (`baseline`) and the
bytes it must move (`bytes_moved`). Each case is timed by course/harness.py as a grading times
it (CUDA events, the L2 flushed, inputs rotated over sets), then judged as one
(course/judge.py): a row whose timed outputs were wrong says so. Host-bound rows (the host's
work took longer than the GPU's) are marked, and their host and GPU times given apart.

--list: each case's largest input and bytes, without timing (no GPU needed).
--sweep D ...: each perf case on rows ([rows, D] inputs) again at each row length D, with
the case's number of elements; --shapes ROWSxCOLS ...: again at each of these shapes.
"""

from __future__ import annotations

import argparse
import dataclasses
import os
import sys

import torch

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from bench.reference_build import build_reference
from course import bench
from course.cases import Case, generator_for, make_input_sets
from course.harness import execute
from course.judge import describe_inputs, judge_perf
from course.spec import units

SEED = 1234  # the inputs' draw; any seed times the same shapes


def perf_cases(spec, sweep: tuple[int, ...] = (), shapes: tuple[tuple[int, int], ...] = ()) -> list[Case]:
    """The suite's perf cases, then each one on rows again at every row length in `sweep`, and
    at every [rows, cols] shape in `shapes`."""
    cases = [case for case in spec.CASES if case.kind == "perf"]
    on_rows = [case for case in cases if len(case.params.get("shape", ())) == 2]
    again = [(case, at_row_length(case, cols)) for case in on_rows for cols in sweep]
    again += [(case, at_shape(case, shape)) for case in on_rows for shape in shapes]
    # A case again at its own shape would be timed twice.
    return cases + [variant for case, variant in again if variant.params["shape"] != tuple(case.params["shape"])]


def at_shape(case: Case, shape: tuple[int, ...]) -> Case:
    """The perf case on inputs of another shape: its suite makes them, and counts their bytes."""
    shape = tuple(shape)
    return dataclasses.replace(
        case, name=f"{case.name} at {'x'.join(map(str, shape))}", params={**case.params, "shape": shape}
    )


def at_row_length(case: Case, cols: int) -> Case:
    """The perf case on [rows, cols] inputs with as many elements as its own."""
    if not 0 < cols <= case.elements:
        raise ValueError(f"--sweep {cols}: expected a row length from 1 to {case.elements} ({case.name}'s elements)")
    return at_shape(case, (case.elements // cols, cols))


def _shape(text: str) -> tuple[int, int]:
    rows, _, cols = text.partition("x")
    if not (rows.isdigit() and cols.isdigit() and int(rows) > 0 and int(cols) > 0):
        raise argparse.ArgumentTypeError(f"{text!r}: expected a shape ROWSxCOLS, such as 4096x1024")
    return int(rows), int(cols)


def planned(spec, case: Case) -> str:
    """What the case times and the bytes it counts, from inputs made on the meta device: shapes
    and dtypes, no data, no GPU."""
    with torch.device("meta"):
        inputs = spec.make_inputs(case, generator_for(case, SEED))
    return f"{case.name}: {describe_inputs(inputs)}, {spec.bytes_moved(inputs) / 1e6:.1f} MB moved"


def _timing(entry: dict, on_gpu: bool) -> bench.Timing:
    return bench.Timing(
        entry["median_ms"],
        entry["spread"],
        entry["reps"],
        host_bound=bool(entry.get("host_bound")),
        gpu_ms=entry.get("gpu_ms", 0.0),
        host_ms=entry.get("host_ms", 0.0),
        unseen=bool(entry.get("unseen")),
        on_gpu=on_gpu,
    )


def timed_row(spec, module, case: Case, ceiling: float | None, seed: int = SEED) -> bench.Row:
    """The reference (`module`) and the suite's baseline timed on the case's inputs, and the
    reference's timed outputs judged: a row of course/bench.py's tables."""
    input_sets = make_input_sets(spec, case, seed)
    result = execute(spec, module, case, input_sets)
    # Judged against itself: its outputs decide, its ratio is 1.
    verdict = judge_perf(
        spec, case, input_sets, result, {"timing": result["torch_timing"], "reference_timing": result["timing"]}
    )
    shape = case.params.get("shape", ())
    row = bench.Row(
        case.name,
        spec.bytes_moved(input_sets[0]),
        _timing(result["timing"], case.device == "cuda"),
        _timing(result["torch_timing"], case.device == "cuda"),
        ceiling,
        shape[-1] if shape else None,
        "" if verdict.passed else verdict.message,
    )
    del input_sets, result
    if torch.cuda.is_available():
        torch.cuda.empty_cache()
    return row


def recorded_ratios(rows: list[bench.Row], cases: list[Case]) -> list[str]:
    """Each case's `reference_vs_torch` (the notebook's estimate of the reference from torch's
    time), beside what this run measured."""
    recorded = {case.name: case.params["reference_vs_torch"] for case in cases if "reference_vs_torch" in case.params}
    return [
        f"  {row.name}: reference_vs_torch {recorded[row.name]:g} in the suite, {row.speedup:.2f} measured"
        for row in rows
        if row.name in recorded
    ]


def _arguments(argv):
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("unit", help="a unit's folder name under solutions/, such as day08_triton_basics")
    parser.add_argument("--list", action="store_true", help="list the cases and their bytes; time nothing")
    parser.add_argument(
        "--sweep",
        nargs="+",
        type=int,
        default=(),
        metavar="D",
        help="each perf case on rows also at these row lengths, with its elements",
    )
    parser.add_argument(
        "--shapes",
        nargs="+",
        type=_shape,
        default=(),
        metavar="ROWSxCOLS",
        help="each perf case on rows also at these shapes",
    )
    parser.add_argument("--seed", type=int, default=SEED)
    parser.add_argument("--markdown", help="also write the table as markdown to this file")
    return parser.parse_args(argv)


def main(argv=None) -> None:
    args = _arguments(argv)
    names = [unit.name for unit in units.all_units()]
    if args.unit not in names:
        raise SystemExit(f"unit {args.unit!r}: expected one of {', '.join(names)}")
    spec = units.load(args.unit).tests(hidden=True)
    try:
        cases = perf_cases(spec, tuple(args.sweep), tuple(args.shapes))
    except ValueError as error:
        raise SystemExit(str(error)) from None
    if not cases:
        raise SystemExit(f"{args.unit} has no perf cases: nothing to time")
    if args.list:
        print("\n".join(planned(spec, case) for case in cases))
        return
    if any(case.device.startswith("cuda") for case in cases) and not torch.cuda.is_available():
        raise SystemExit(f"{args.unit}'s perf cases run on a CUDA GPU, and there is none here (--list needs none)")
    module, seconds = build_reference(args.unit)
    print(f"built {args.unit} in {seconds:.0f} s")
    ceiling = bench.copy_ceiling_gbs() if torch.cuda.is_available() else None
    rows = [timed_row(spec, module, case, ceiling, args.seed) for case in cases]
    tables = [bench.format_table(rows, ceiling, f"{args.unit}: the reference (ours) vs the suite's baseline")]
    lines = recorded_ratios(rows, cases)
    print("\n\n".join(tables) + ("\n\n" + "\n".join(lines) if lines else ""))
    if args.markdown:
        bench.write_markdown(args.markdown, tables, lines)


if __name__ == "__main__":
    main()

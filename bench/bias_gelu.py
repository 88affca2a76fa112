"""Reference fused bias + GELU kernels (day06) against eager PyTorch and torch.compile at more
shapes than the suite grades, in GB/s; the targets they must meet.

    python bench/bias_gelu.py [--markdown docs/bias_gelu.md]

The cases, their inputs, eager baselines and bytes are the suite's perf cases (forward and
backward, float32 and bfloat16), timed by bench/unit.py, again at each row length in DIMS (with
their elements) and at each of SHAPES. Forward: ours against eager `F.gelu(x + bias)` and
`torch.compile` of it. Backward: ours (dx and dbias) against the backward of that function
through autograd, eager and compiled, each on a graph built once, so that both sides time the
backward alone. Ends with the targets, each marked met or missed.
"""

import argparse
import dataclasses
import math
import os
import sys
import types

import torch
import torch.nn.functional as F

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from bench.reference_build import build_reference
from bench.unit import perf_cases, timed_row
from course import bench
from course.spec import units

UNIT = "day06_bias_gelu"
DIMS = (768, 1024, 3072, 8192, 11008)  # and the suite's own 4096
TARGET_SHAPE = (16384, 8192)
SHAPES = (TARGET_SHAPE, (4096, 1024))


def _gelu(x, bias, approximate):
    return F.gelu(x + bias, approximate=approximate)


def compiled_suite(spec):
    """The suite measured against torch.compile of its eager code: the forward compiled, and the
    backward through autograd on a compiled forward's graph."""
    torch._dynamo.reset()
    # One static compile per shape and dtype; past dynamo's recompile limit (8 by default) a new
    # shape would quietly run eager under the "compile" label.
    torch._dynamo.config.cache_size_limit = 64
    compiled = torch.compile(_gelu, dynamic=False)

    def baseline(inputs):
        if inputs["op"] == "forward":
            return compiled(inputs["x"], inputs["bias"], inputs["approximate"])
        return spec.baseline(inputs)

    def on_device(case, inputs):
        inputs = spec.on_device(case, inputs)
        if case.kind == "perf" and inputs["op"] == "backward":
            inputs["eager_y"] = compiled(inputs["eager_x"], inputs["eager_bias"], inputs["approximate"])
        return inputs

    return types.SimpleNamespace(**{**vars(spec), "baseline": baseline, "on_device": on_device})


def rows_against(spec, ext, cases, label, ceiling):
    """Each case's row against `spec`'s baseline, named for it; (rows, why not) where torch.compile
    fails here."""
    try:
        rows = [timed_row(spec, ext, case, ceiling) for case in cases]
    except Exception as error:
        return [], f"{type(error).__name__}: {str(error).splitlines()[0][:100] if str(error) else ''}"
    return [dataclasses.replace(row, name=f"{row.name} vs {label}") for row in rows], ""


def geomean(values):
    return math.exp(sum(math.log(v) for v in values) / len(values)) if values else float("nan")


def all_met(rows, test):
    """True, False, or None where there is no row to judge (torch.compile not available)."""
    return all(test(r) for r in rows) if rows else None


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--markdown", help="also write the tables and targets as markdown to this file")
    args = parser.parse_args()
    spec = units.load(UNIT).tests(hidden=True)
    ext, seconds = build_reference(UNIT)
    print(f"built {UNIT} in {seconds:.0f} s")
    ceiling = bench.copy_ceiling_gbs()
    cases = {
        op: [case for case in perf_cases(spec, DIMS, SHAPES) if case.params["op"] == op]
        for op in ("forward", "backward")
    }
    table, why = {}, set()
    for op, op_cases in cases.items():
        table[op, "eager"], _ = rows_against(spec, ext, op_cases, "eager", ceiling)
        table[op, "compile"], problem = rows_against(compiled_suite(spec), ext, op_cases, "compile", ceiling)
        why |= {problem} - {""}
    titles = {
        ("forward", "eager"): "forward: ours vs eager F.gelu(x + bias)",
        ("forward", "compile"): "forward: ours vs torch.compile of it",
        ("backward", "eager"): "backward: ours (dx, dbias) vs eager autograd",
        ("backward", "compile"): "backward: ours (dx, dbias) vs torch.compile's autograd",
    }
    tables = [bench.format_table(table[key], ceiling, title) for key, title in titles.items() if table[key]]
    if why:
        tables.append("torch.compile: not available: " + "; ".join(sorted(why)))
    print("\n\n".join(tables))

    def at_target(rows):
        return [
            row for row in rows if row.name.partition(" vs ")[0].endswith(" at " + "x".join(map(str, TARGET_SHAPE)))
        ]

    forward_eager, backward_eager = table["forward", "eager"], table["backward", "eager"]
    targets = [
        (
            "forward >= 0.90 of the ceiling at 16384x8192 fp32 and bf16",
            all_met(at_target(forward_eager), lambda r: r.of_ceiling >= 0.90),
        ),
        (
            "backward >= 0.80 of the ceiling at 16384x8192 fp32 and bf16",
            all_met(at_target(backward_eager), lambda r: r.of_ceiling >= 0.80),
        ),
        (
            "forward >= 1.0x torch.compile at every shape",
            all_met(table["forward", "compile"], lambda r: r.speedup >= 1.0),
        ),
        (
            "backward >= 1.0x torch.compile at every shape",
            all_met(table["backward", "compile"], lambda r: r.speedup >= 1.0),
        ),
        ("forward >= 2x eager at every shape (the bytes allow 2x)", all_met(forward_eager, lambda r: r.speedup >= 2.0)),
        (
            "backward >= 2x eager at every shape (the bytes allow 1.33x: eager moves 4 passes, ours 3)",
            all_met(backward_eager, lambda r: r.speedup >= 2.0),
        ),
        ("every output right after timing", not any(r.wrong for rows in table.values() for r in rows)),
    ]
    marks = {True: "met   ", False: "MISSED", None: "n/a   "}
    lines = [
        (
            f"geometric mean speed-up, forward vs eager: {geomean([r.speedup for r in forward_eager]):.2f}x, "
            f"backward vs eager: {geomean([r.speedup for r in backward_eager]):.2f}x"
        ),
        *[f"  {marks[met]} {text}" for text, met in targets],
    ]
    print("\n" + "\n".join(lines))
    if args.markdown:
        bench.write_markdown(args.markdown, tables, lines)


if __name__ == "__main__":
    main()

"""day08's reference Triton kernels against PyTorch at more row lengths than the suite grades,
and the targets they must meet.

    python bench/triton_basics.py [--markdown out.md]

The cases, their baselines (x + y, torch.softmax) and bytes are the suite's perf cases, timed
by bench/unit.py; the softmax ones again at each row length in SOFTMAX_COLS, with their
elements. Ends with the targets, each marked met or missed.
"""

import argparse
import os
import sys

import torch

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from bench.reference_build import build_reference
from bench.unit import perf_cases, timed_row
from course import bench
from course.spec import units

UNIT = "day08_triton_basics"
SOFTMAX_COLS = (256, 1024, 8192, 16384, 32768, 65536)  # and the suite's own 4096
TARGET_SHAPE = (16384, 4096)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--markdown", help="also write the tables as markdown to this file")
    args = parser.parse_args()
    spec = units.load(UNIT).tests(hidden=True)
    ext, _ = build_reference(UNIT)
    ceiling = bench.copy_ceiling_gbs()
    cases = perf_cases(spec, SOFTMAX_COLS)
    rows = [timed_row(spec, ext, case, ceiling) for case in cases]
    adds = [row for row, case in zip(rows, cases) if case.params["op"] == "add"]
    softmaxes = [row for row, case in zip(rows, cases) if case.params["op"] == "softmax"]
    tables = [
        bench.format_table(adds, ceiling, "vector add: ours vs x + y"),
        bench.format_table(softmaxes, ceiling, "softmax: ours vs torch.softmax"),
    ]
    at_target = [
        row
        for row, case in zip(rows, cases)
        if case.params["op"] == "softmax"
        and case.params["shape"] == TARGET_SHAPE
        and case.params["dtype"] == torch.float32
    ]
    targets = [
        (
            "softmax >= 0.85 of the ceiling at 16384x4096 fp32",
            bool(at_target) and all(r.of_ceiling >= 0.85 for r in at_target),
        ),
        ("softmax >= 1.0x torch at every shape", all(r.speedup >= 1.0 for r in softmaxes)),
        ("vector add >= 0.95x torch", all(r.speedup >= 0.95 for r in adds)),
        ("every output right after timing", not any(r.wrong for r in rows)),
    ]
    bench.report(tables, targets, args.markdown)


if __name__ == "__main__":
    main()

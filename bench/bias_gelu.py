"""Reference fused bias + GELU kernels (day06) against eager PyTorch and torch.compile, in GB/s.

    python bench/bias_gelu.py [--fp16] [--markdown docs/bias_gelu.md]

Forward: ours (`_ext.forward`) against eager `F.gelu(x + bias)` and `torch.compile` of that same
function. Backward: ours (`_ext.backward`: dx and dbias) against the backward of that function
through autograd, eager and compiled, each on a graph built once, so that both sides time the
backward alone. Shapes: N in DIMS with 2^26 elements, plus 16384 x 8192 and 4096 x 1024; float32
and bfloat16 (and float16 with --fp16); approximate="none". Bytes: forward element * (2MN + N),
backward element * (3MN + 2N): each input read once, each output written once, whoever runs it.
The copy ceiling is a large device-to-device copy in the same run. Every row's outputs are
re-checked after timing, and two backward calls must give the same bits. Ends with the targets,
each marked met or missed.
"""
import argparse
import math
import os
import sys

import torch
import torch.nn.functional as F

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from bench.reference_build import build_reference  # noqa: E402
from course import bench  # noqa: E402

UNIT = "day06_bias_gelu"
DIMS = (768, 1024, 3072, 4096, 8192, 11008)
ELEMENTS = 1 << 26  # per tensor: 256 MB of fp32, far above any L2
TARGET_SHAPE = (16384, 8192)
INPUT_SETS = 2


def shapes():
    return [(ELEMENTS // d, d) for d in DIMS] + [TARGET_SHAPE, (4096, 1024)]


def build():
    module, seconds = build_reference(UNIT)
    print(f"built {UNIT} in {seconds:.0f} s")
    return module


def eager(x, bias):
    return F.gelu(x + bias)


def compile_eager(*example):
    """A freshly compiled eager (static shapes) and '' once it ran on `example`, or None and why not."""
    torch._dynamo.reset()  # one compilation per shape, and no cache limit reached across shapes
    try:
        function = torch.compile(eager, dynamic=False)
        function(*example)
        return function, ""
    except Exception as error:  # noqa: BLE001 - any failure means: not available here
        return None, f"{type(error).__name__}: {str(error).splitlines()[0][:100] if str(error) else ''}"


def timed_if_compiled(time, compiled, why):
    """(time(), '') where compilation worked and the compiled op runs, else (None, why not)."""
    if compiled is None:
        return None, why
    try:
        return time(), ""
    except Exception as error:  # noqa: BLE001 - a compiled backward that fails is "not available" too
        return None, f"{type(error).__name__}: {str(error).splitlines()[0][:100] if str(error) else ''}"


def close(got, expected, dtype):
    """'' when got matches expected (float32) to dtype's accuracy, relative to 1 + |expected|."""
    tolerance = 1e-3 if dtype == torch.float32 else 2e-2
    error = ((got.float() - expected.float()).abs() / (1 + expected.float().abs())).max().item()
    return "" if error <= tolerance else f"max relative error {error:.3g}"


def rows_against(name, nbytes, ours, baselines, problem, ceiling, d):
    """One bench.Row per baseline that could be timed, all sharing our timing."""
    return {label: bench.Row(f"{name} vs {label}", nbytes, ours, timing, ceiling, d, problem)
            for label, timing in baselines.items() if timing is not None}


def forward_rows(ext, rows, cols, dtype, ceiling):
    sets = [(torch.randn(rows, cols, device="cuda", dtype=dtype), torch.randn(cols, device="cuda", dtype=dtype))
            for _ in range(INPUT_SETS)]
    nbytes = sets[0][0].element_size() * (2 * rows * cols + cols)
    ours = bench.time_op(lambda x, b: ext._ext.forward(x, b), sets)
    problem = ""
    for outputs, (x, b) in zip(ours.last_outputs, sets):
        problem = problem or close(outputs, eager(x.float(), b.float()), dtype)
    ours.last_outputs = []
    baselines = {"eager": bench.time_op(eager, sets)}
    compiled, why = compile_eager(*sets[0])
    baselines["compile"], why = timed_if_compiled(lambda: bench.time_op(compiled, sets), compiled, why)
    for timing in baselines.values():
        if timing is not None:
            timing.last_outputs = []
    del sets
    return rows_against(f"fwd {rows}x{cols} {str(dtype)[6:]}", nbytes, ours, baselines, problem, ceiling, cols), why


def backward_rows(ext, rows, cols, dtype, ceiling):
    x = torch.randn(rows, cols, device="cuda", dtype=dtype)
    bias = torch.randn(cols, device="cuda", dtype=dtype)
    leaf, bias_leaf = x.detach().requires_grad_(), bias.detach().requires_grad_()
    sets = [(torch.randn_like(x),) for _ in range(INPUT_SETS)]
    nbytes = x.element_size() * (3 * rows * cols + 2 * cols)
    ours = bench.time_op(lambda dy: ext._ext.backward(dy, x, bias), sets)
    problem = ""
    x32, bias32 = x.detach().float().requires_grad_(), bias.detach().float().requires_grad_()
    y32 = eager(x32, bias32)
    for outputs, (dy,) in zip(ours.last_outputs, sets):
        expected = torch.autograd.grad(y32, (x32, bias32), dy.float(), retain_graph=True)
        problem = problem or " ".join(filter(None, (close(o, e, dtype) for o, e in zip(outputs, expected))))
    ours.last_outputs = []
    del x32, bias32, y32
    first, second = ext._ext.backward(sets[0][0], x, bias), ext._ext.backward(sets[0][0], x, bias)
    deterministic = all(torch.equal(a, b) for a, b in zip(first, second))
    del first, second

    def through_autograd(y):
        timing = bench.time_op(lambda dy: torch.autograd.grad(y, (leaf, bias_leaf), dy, retain_graph=True), sets)
        timing.last_outputs = []
        return timing

    baselines = {"eager": through_autograd(eager(leaf, bias_leaf))}
    compiled, why = compile_eager(leaf, bias_leaf)
    baselines["compile"], why = timed_if_compiled(lambda: through_autograd(compiled(leaf, bias_leaf)), compiled, why)
    del sets
    rows_by_label = rows_against(f"bwd {rows}x{cols} {str(dtype)[6:]}", nbytes, ours, baselines, problem, ceiling,
                                 cols)
    return rows_by_label, why, deterministic


def geomean(values):
    return math.exp(sum(math.log(v) for v in values) / len(values)) if values else float("nan")


def all_met(rows, test):
    """True, False, or None where there is no row to judge (torch.compile not available)."""
    return all(test(r) for r in rows) if rows else None


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--fp16", action="store_true", help="also time float16")
    parser.add_argument("--markdown", help="also write the tables and targets as markdown to this file")
    args = parser.parse_args()
    ext = build()
    ceiling = bench.copy_ceiling_gbs()
    dtypes = [torch.float32, torch.bfloat16] + ([torch.float16] if args.fp16 else [])
    table = {(op, label): [] for op in ("fwd", "bwd") for label in ("eager", "compile")}
    deterministic, compile_problems = True, set()
    for dtype in dtypes:
        for rows, cols in shapes():
            forward, why = forward_rows(ext, rows, cols, dtype, ceiling)
            backward, why_backward, same = backward_rows(ext, rows, cols, dtype, ceiling)
            compile_problems |= {w for w in (why, why_backward) if w}
            deterministic &= same
            for op, by_label in (("fwd", forward), ("bwd", backward)):
                for label, row in by_label.items():
                    table[op, label].append(row)
            torch.cuda.empty_cache()
    titles = {("fwd", "eager"): "forward: ours vs eager F.gelu(x + bias)",
              ("fwd", "compile"): "forward: ours vs torch.compile of it",
              ("bwd", "eager"): "backward: ours (dx, dbias) vs eager autograd",
              ("bwd", "compile"): "backward: ours (dx, dbias) vs torch.compile's autograd"}
    tables = [bench.format_table(table[key], ceiling, title) for key, title in titles.items() if table[key]]
    if compile_problems:
        tables.append("torch.compile: not available: " + "; ".join(sorted(compile_problems)))
    print("\n\n".join(tables))

    def at_target(rows):
        return [r for r in rows if r.name.split()[1] == "x".join(map(str, TARGET_SHAPE))
                and r.name.split()[2] in ("float32", "bfloat16")]

    forward_eager, backward_eager = table["fwd", "eager"], table["bwd", "eager"]
    targets = [
        ("forward >= 0.90 of the ceiling at 16384x8192 fp32 and bf16",
         all_met(at_target(forward_eager), lambda r: r.of_ceiling >= 0.90)),
        ("backward >= 0.80 of the ceiling at 16384x8192 fp32 and bf16",
         all_met(at_target(backward_eager), lambda r: r.of_ceiling >= 0.80)),
        ("forward >= 1.0x torch.compile at every shape", all_met(table["fwd", "compile"], lambda r: r.speedup >= 1.0)),
        ("backward >= 1.0x torch.compile at every shape", all_met(table["bwd", "compile"], lambda r: r.speedup >= 1.0)),
        ("forward >= 2x eager at every shape (the bytes allow 2x)", all_met(forward_eager, lambda r: r.speedup >= 2.0)),
        ("backward >= 2x eager at every shape (the bytes allow 1.33x: eager moves 4 passes, ours 3)",
         all_met(backward_eager, lambda r: r.speedup >= 2.0)),
        ("backward deterministic (two calls bit for bit equal)", deterministic),
        ("every output right after timing", not any(r.wrong for rows in table.values() for r in rows)),
    ]
    marks = {True: "met   ", False: "MISSED", None: "n/a   "}
    lines = [f"geometric mean speed-up, forward vs eager: {geomean([r.speedup for r in forward_eager]):.2f}x, "
             f"backward vs eager: {geomean([r.speedup for r in backward_eager]):.2f}x",
             *[f"  {marks[met]} {text}" for text, met in targets]]
    print("\n" + "\n".join(lines))
    if args.markdown:
        bench.write_markdown(args.markdown, tables, lines)


if __name__ == "__main__":
    main()

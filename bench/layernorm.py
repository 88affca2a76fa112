"""Reference LayerNorm kernels (day05) against PyTorch's, forward and backward, in GB/s.

    python bench/layernorm.py [--dtypes float32 float16 bfloat16] [--dims 1024 65536] [--markdown docs/performance.md]

Forward: the suite's forward perf cases (their inputs, their baseline F.layer_norm, their bytes
and the judging of their outputs, by bench/unit.py) with version 4 (the row in registers,
`kernel="auto"`) in version 3's place, at each shape below. Backward: the
fused kernel against aten::native_layer_norm_backward called directly (one op each, like for
like), then through autograd (what users run) twice: as day07's package runs these kernels (a
custom operator whose backward node is C++), and as day05's Python autograd.Function does. The
package's rows carry the target: a Python Function's backward costs host time that torch's C++
node does not, whatever its kernels. Backward bytes: backward_bytes of the unit (each input
read once, each output written once). The copy ceiling is a large
device-to-device copy in the same run. Every row's outputs are re-checked after timing.
Ends with the issue's targets, each marked met or missed.
"""

import argparse
import dataclasses
import math
import os
import sys

import torch
import torch.nn.functional as F

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from bench import checks
from bench.reference_build import build_reference
from bench.unit import at_shape, perf_cases, timed_row
from course import bench
from course.spec import units

UNIT = "day05_layernorm_performance"
PACKAGE_UNIT = "day07_layernorm_package"
DIMS = (7, 128, 768, 1000, 1024, 2560, 4096, 8192, 12288, 16384, 32768, 65536)
ELEMENTS = 1 << 26  # per tensor: 256 MB of fp32, far above any L2
EPS = 1e-5


def shapes(dims=DIMS):
    return [(ELEMENTS // d, d) for d in dims] + [(4096, 1024)]


def build():
    """day05's module, and day07's package (the same kernels as a custom operator)."""
    module, seconds = build_reference(UNIT)
    print(f"built {UNIT} in {seconds:.0f} s")
    _, seconds = build_reference(PACKAGE_UNIT)
    print(f"built {PACKAGE_UNIT} in {seconds:.0f} s")
    import fast_layernorm  # the build put it on sys.path

    return module, fast_layernorm


def close(got, expected, dtype):
    return checks.close(got, expected, dtype, sixteen_bit=2e-2, float32=1e-3)


def forward_cases(spec, dtypes, dims) -> list:
    """The suite's first forward perf case of each dtype (its inputs, baseline F.layer_norm and
    bytes), with version 4 (kernel="auto") in version 3's place, at each of shapes(dims)."""
    first = {}
    for case in perf_cases(spec):
        first.setdefault(case.params["dtype"], case)
    missing = [str(dtype) for dtype in dtypes if dtype not in first]
    if missing:
        raise SystemExit(
            f"--dtypes: the suite has no perf case of {', '.join(missing)}; "
            f"expected some of {', '.join(str(dtype)[6:] for dtype in first)}"
        )
    return [
        at_shape(dataclasses.replace(first[dtype], params={**first[dtype].params, "kernel": "auto"}), shape)
        for dtype in dtypes
        for shape in shapes(dims)
    ]


def forward_row(spec, ext, case, ceiling):
    row = timed_row(spec, ext, case, ceiling)
    rows, cols = case.params["shape"]
    return dataclasses.replace(row, name=f"fwd {rows}x{cols} {str(case.params['dtype'])[6:]}")


def backward_rows(ext, package, rows, cols, dtype, ceiling):
    x = torch.randn(rows, cols, device="cuda", dtype=dtype)
    gamma = (torch.rand(cols, device="cuda") + 0.5).to(dtype)
    beta = torch.zeros_like(gamma)
    _, mean, rstd = ext._ext.forward(x, gamma, beta, EPS)
    sets = [(torch.randn_like(x), x, gamma, mean, rstd) for _ in range(2)]
    nbytes = ext.backward_bytes(rows, cols, dtype)

    def native(dy, x, g, m, r):
        return torch.ops.aten.native_layer_norm_backward(
            dy, x, (cols,), m[:, None], r[:, None], g, beta, (True, True, True)
        )

    def check(outputs, args):
        expected = native(*args)
        return " ".join(filter(None, (close(o, e, dtype) if o.dim() == 2 else "" for o, e in zip(outputs, expected))))

    op = bench.compare(
        f"bwd {rows}x{cols} {str(dtype)[6:]}",
        lambda dy, x, g, m, r: ext._ext.backward(dy, x, g, m, r),
        native,
        sets,
        nbytes,
        check=check,
        ceiling=ceiling,
        d=cols,
    )
    # The same through autograd: forward saved, then backward of a kept graph each call.
    leaf = x.detach().requires_grad_()
    w, b = gamma.detach().requires_grad_(), beta.detach().requires_grad_()
    torch_y = F.layer_norm(leaf, (cols,), w, b, EPS)
    grads = [(dy,) for dy, *_ in sets]

    def torch_grads(dy):
        return torch.autograd.grad(torch_y, (leaf, w, b), dy, retain_graph=True)

    def through(layer_norm):
        y = layer_norm(leaf, (cols,), w, b, EPS)
        return bench.compare(
            f"autograd {rows}x{cols} {str(dtype)[6:]}",
            lambda dy: torch.autograd.grad(y, (leaf, w, b), dy, retain_graph=True),
            torch_grads,
            grads,
            nbytes,
            check=lambda outputs, args: close(outputs[0], torch_grads(*args)[0], dtype),
            ceiling=ceiling,
            d=cols,
        )

    autograd = through(package.layer_norm), through(ext.layer_norm)
    deterministic = all(torch.equal(a, b) for a, b in zip(ext._ext.backward(*sets[0]), ext._ext.backward(*sets[0])))
    return op, autograd, deterministic


def geomean(values):
    return math.exp(sum(math.log(v) for v in values) / len(values))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--dtypes", nargs="+", default=["float32", "float16", "bfloat16"])
    parser.add_argument(
        "--dims",
        nargs="+",
        type=int,
        default=list(DIMS),
        help="row lengths D, each at 2^26 elements (4096x1024 is always run)",
    )
    parser.add_argument("--markdown", help="also write the tables as markdown to this file")
    args = parser.parse_args()
    ext, package = build()
    ceiling = bench.copy_ceiling_gbs()
    spec = units.load(UNIT).tests(hidden=True)
    dtypes = [getattr(torch, name) for name in args.dtypes]
    forward = [forward_row(spec, ext, case, ceiling) for case in forward_cases(spec, dtypes, args.dims)]
    backward, autograd, function, deterministic = [], [], [], True
    for dtype in dtypes:
        for rows, cols in shapes(args.dims):
            op, (through_package, through_function), same = backward_rows(ext, package, rows, cols, dtype, ceiling)
            backward.append(op)
            autograd.append(through_package)
            function.append(through_function)
            deterministic &= same
            torch.cuda.empty_cache()
    tables = [
        bench.format_table(forward, ceiling, "forward: ours (auto) vs F.layer_norm"),
        bench.format_table(backward, ceiling, "backward op: ours (auto) vs aten::native_layer_norm_backward"),
        bench.format_table(
            autograd, ceiling, "backward through autograd: day07's operator (these kernels) vs F.layer_norm"
        ),
        bench.format_table(
            function, ceiling, "backward through autograd: day05's Python autograd.Function vs F.layer_norm (no target)"
        ),
    ]
    print("\n\n".join(tables))

    big = [r for r in forward if r.name.startswith("fwd 16384x4096") and ("float32" in r.name or "bfloat16" in r.name)]
    wide_backward = [r for r in backward if r.d in (32768, 65536) and ("float32" in r.name or "bfloat16" in r.name)]
    targets = [
        ("forward >= 0.90 of the ceiling at 16384x4096 fp32 and bf16", all(r.of_ceiling >= 0.90 for r in big)),
        (
            "forward >= 0.85 of the ceiling at D = 16384, 32768, 65536",
            all(r.of_ceiling >= 0.85 for r in forward if r.d >= 16384),
        ),
        ("forward >= 1.0x torch at every shape", all(r.speedup >= 1.0 for r in forward)),
        ("forward >= 10x torch at D = 7", all(r.speedup >= 10 for r in forward if r.d == 7)),
        (
            "backward >= 0.75 of the ceiling at 1024 <= D <= 16384 (2^26 elements)",
            all(
                r.of_ceiling >= 0.75
                for r in backward
                if 1024 <= r.d <= 16384 and not r.name.startswith("bwd 4096x1024")
            ),
        ),
        (
            "backward >= 0.70 of the ceiling at 2048x32768 and 1024x65536, fp32 and bf16",
            all(r.of_ceiling >= 0.70 for r in wide_backward),
        ),
        (
            "backward op and through autograd >= 1.0x torch at every shape",
            all(r.speedup >= 1.0 for r in backward + autograd),
        ),
        ("backward >= 2x native_layer_norm_backward, geometric mean", geomean([r.speedup for r in backward]) >= 2.0),
        ("backward deterministic (two calls bit for bit equal)", deterministic),
        ("every output right after timing", not any(r.wrong for r in forward + backward + autograd + function)),
    ]
    lines = [
        f"backward geometric mean speed-up: {geomean([r.speedup for r in backward]):.2f}x",
        *bench.target_lines(targets),
    ]
    print("\n" + "\n".join(lines))
    if args.markdown:
        bench.write_markdown(args.markdown, tables, lines)


if __name__ == "__main__":
    main()

"""day09's reference kernels against PyTorch at more shapes than the suite grades, and against
torch.compile of what the suite measures them against; the targets they must meet.

    python bench/rmsnorm_int8.py [--markdown out.md]

The cases, their baselines and bytes are the suite's perf cases, timed by bench/unit.py: the
fused RMSNorm + INT8 quantization (CUDA and Triton) against the unfused PyTorch code, eager
and under torch.compile, at each row length in QUANT_COLS; RMSNorm forward and backward
against F.rms_norm through autograd, eager and compiled, at each of NORM_SHAPES. The suite has
no perf case of the residual add: its rows are this file's own (bytes: quant's, and residual
read and written). Nor of rms_norm_backward alone: Triton's against CUDA's at each of
BACKWARD_SHAPES, fp32 and bf16, as eager autograd calls them. Nor of the forward and the
backward apart against F.rms_norm: both backends at the GPU-bound APART_SHAPES, in fp32, bf16
and fp16. Ends with the targets, each marked met or missed; a target holds only at shapes
moving at least bench.GPU_BOUND_BYTES, where the time is the kernels', not the host's.
"""

import argparse
import dataclasses
import os
import sys
import types

import torch
import torch.nn.functional as F

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from bench import checks
from bench.reference_build import build_reference
from bench.unit import perf_cases, timed_row
from course import bench
from course.spec import units

UNIT = "day09_rmsnorm_int8"

QUANT_COLS = (1024, 8192, 14336)  # and the suite's own 4096
NORM_SHAPES = ((4096, 1024), (8192, 4096))  # and the suite's own 16384x8192
RESIDUAL_SHAPE = (16384, 4096)
# D from a model's width to rows walked rather than held; 2^26 elements but at D = 768.
BACKWARD_SHAPES = ((65536, 768), (16384, 4096), (4096, 16384), (2048, 32768), (1024, 65536))
EPS = 1e-6
# The forward and the backward apart: shapes whose forward moves at least 192 MB in 16 bits.
APART_SHAPES = ((16384, 4096), (65536, 768), (4096, 16384), (1024, 65536))
APART_DTYPES = (torch.float32, torch.bfloat16, torch.float16)
CONTENDERS = ("CUDA", "Triton", "eager", "compiled")


def bf16_cases(spec, op: str, backend: str, sweep=(), shapes=()) -> list:
    """The suite's bf16 perf cases of `op` on `backend`, then at the extra row lengths and shapes."""
    return [
        case
        for case in perf_cases(spec, sweep, shapes)
        if case.params["op"] == op and case.params["backend"] == backend and case.params["dtype"] == torch.bfloat16
    ]


def compiled_suite(spec):
    """The suite with torch.compile of its baseline in the baseline's place."""
    return types.SimpleNamespace(**{**vars(spec), "baseline": torch.compile(spec.baseline, dynamic=False)})


def rows_against(spec, ext, cases, label, ceiling) -> list[bench.Row]:
    rows = [timed_row(spec, ext, case, ceiling) for case in cases]
    return [dataclasses.replace(row, name=f"{row.name} vs {label}") for row in rows]


def residual_row(ext, backend, dtype, ceiling):
    rows, cols = RESIDUAL_SHAPE
    sets = [
        tuple(torch.randn(*shape, device="cuda", dtype=dtype) for shape in ((rows, cols), (rows, cols), (cols,)))
        for _ in range(2)
    ]
    nbytes = rows * cols * (3 * sets[0][0].element_size() + 1) + 4 * rows
    # Both update residual in place on every call: the values drift, the work does not.
    return bench.compare(
        f"{backend} residual {rows}x{cols} {str(dtype)[6:]} vs compiled",
        lambda x, r, w: ext.add_rms_norm_quant(x, r, w, EPS, backend=backend),
        torch.compile(lambda x, r, w: _unfused_residual(ext, x, r, w), dynamic=False),
        sets,
        nbytes,
        ceiling=ceiling,
        d=cols,
    )


def _unfused_residual(ext, x, residual, weight):
    q, scale, new = ext.rms_norm_quant_unfused(x, weight, EPS, residual=residual)
    residual.copy_(new)
    return q, scale


def backward_table(ext) -> tuple[str, list[float]]:
    """rms_norm_backward alone (rstd given), CUDA's op against the Triton function eager autograd
    runs: the table, and Triton's time over CUDA's for each row."""
    triton_ops = ext.rmsnorm_triton
    lines = [
        f"RMSNorm backward alone, Triton against CUDA: {bench.device_name()}, torch {torch.__version__}",
        f"{'case':<20} {'CUDA ms':>8} {'Triton ms':>10} {'Triton/CUDA':>12} {'CUDA GB/s':>10}",
    ]
    ratios = []
    for rows, cols in BACKWARD_SHAPES:
        for dtype in (torch.float32, torch.bfloat16):
            sets = []
            for _ in range(2):
                x = torch.randn(rows, cols, device="cuda", dtype=dtype)
                rstd = (x.float().square().mean(-1) + EPS).rsqrt()
                sets.append((torch.randn_like(x), x, torch.randn(cols, device="cuda", dtype=dtype), rstd))
            cuda = bench.time_op(ext.ops("cuda").rms_norm_backward, sets)
            triton = bench.time_op(lambda *args: triton_ops._run_direct(triton_ops._rms_norm_backward, *args), sets)
            ratios.append(triton.median_ms / cuda.median_ms)
            nbytes = 3 * rows * cols * sets[0][1].element_size()  # x and dy read, dx written
            lines.append(
                f"{f'{rows}x{cols} {str(dtype)[6:]}':<20} {cuda.median_ms:>8.3f} {triton.median_ms:>10.3f} "
                f"{ratios[-1]:>12.2f} {cuda.gbs(nbytes):>10.0f}"
            )
            del sets
    return "\n".join(lines), ratios


def _contenders(ext) -> dict:
    """RMSNorm as each contender computes it: y from (x, w)."""
    compiled = torch.compile(F.rms_norm, dynamic=False)  # one graph per shape, dtype and grad mode
    return {
        "CUDA": lambda x, w: ext.rms_norm(x, w, EPS, backend="cuda"),
        "Triton": lambda x, w: ext.rms_norm(x, w, EPS, backend="triton"),
        "eager": lambda x, w: F.rms_norm(x, x.shape[-1:], w, EPS),
        "compiled": lambda x, w: compiled(x, x.shape[-1:], w, EPS),
    }


@dataclasses.dataclass
class Apart:
    """One direction at one shape and dtype: each contender's timing on the same inputs."""

    name: str
    direction: str  # "forward" (without grad) or "backward" (of a kept graph: dx and dw)
    nbytes: int
    timings: dict  # contender: bench.Timing
    wrong: bool  # some contender's outputs differ from eager's past the dtype's tolerance

    def ratio(self, slower: str, faster: str) -> float:
        """Of the kernels' times (CUDA events behind a hold, so a call's host time is hidden):
        at a GPU-bound shape the targets are about the kernels; a call whose host time exceeds
        them is shown apart as such (host_note)."""
        return self.timings[slower].gpu_ms / self.timings[faster].gpu_ms

    def host_note(self) -> str:
        """The contenders whose host time exceeded their kernels', with that host time."""
        slow = [f"{n} {t.host_ms:.3f}" for n, t in self.timings.items() if t.host_bound]
        return f"host ms: {', '.join(slow)}" if slow else ""


def _apart_rows(contenders: dict, rows: int, cols: int, dtype) -> list[Apart]:
    x = torch.randn(rows, cols, device="cuda", dtype=dtype, requires_grad=True)
    w = torch.randn(cols, device="cuda", dtype=dtype, requires_grad=True)
    dy = torch.randn(rows, cols, device="cuda", dtype=dtype)
    timings = {"forward": {}, "backward": {}}
    for name, fn in contenders.items():

        def forward(fn=fn):
            with torch.no_grad():
                return (fn(x, w),)

        timings["forward"][name] = bench.time_op(forward, [()], device="cuda")
        y = fn(x, w)
        timings["backward"][name] = bench.time_op(
            lambda y=y: torch.autograd.grad(y, (x, w), dy, retain_graph=True), [()], device="cuda"
        )
        del y
    result = []
    for direction, by_name in timings.items():
        expected = by_name["eager"].last_outputs[0]
        wrong = any(
            checks.close(got, want, dtype, sixteen_bit=3e-2, float32=1e-3)
            for timing in by_name.values()
            for got, want in zip(timing.last_outputs[0], expected)
        )
        nbytes = (2 if direction == "forward" else 3) * x.numel() * x.element_size()
        assert nbytes >= bench.GPU_BOUND_BYTES, (rows, cols, dtype)
        name = f"{'fwd' if direction == 'forward' else 'bwd'} {rows}x{cols} {str(dtype)[6:]}"
        result.append(Apart(name, direction, nbytes, by_name, wrong))
    return result


def apart_table(ext, ceiling) -> tuple[str, list[Apart]]:
    """The forward and the backward apart, ours against F.rms_norm eager and compiled, at the
    GPU-bound APART_SHAPES in every dtype: the table and its rows."""
    contenders = _contenders(ext)
    rows = [row for shape in APART_SHAPES for dtype in APART_DTYPES for row in _apart_rows(contenders, *shape, dtype)]
    lines = [
        f"RMSNorm forward and backward apart vs F.rms_norm: {bench.device_name()}, torch {torch.__version__}, "
        f"copy ceiling {ceiling:.0f} GB/s; each contender's kernels' time a call (ms, CUDA events); "
        "* host-bound: the call's host time, shown at the end, exceeded its kernels'",
        f"{'case':<24} "
        + " ".join(f"{name + ' ms':>12}" for name in CONTENDERS)
        + f" {'CUDA x best':>11} {'Triton/CUDA':>11} {'CUDA of ceiling':>15}  check",
    ]
    for row in rows:
        cells = " ".join(
            f"{row.timings[n].gpu_ms:>11.3f}{'*' if row.timings[n].host_bound else ' '}" for n in CONTENDERS
        )
        best = min(row.ratio("eager", "CUDA"), row.ratio("compiled", "CUDA"))
        of_ceiling = row.nbytes / (row.timings["CUDA"].gpu_ms * 1e-3) / 1e9 / ceiling
        lines.append(
            f"{row.name:<24} {cells} {best:>10.2f}x {row.ratio('Triton', 'CUDA'):>11.2f} {of_ceiling:>15.0%}  "
            + ("WRONG" if row.wrong else "ok")
            + (f"  {row.host_note()}" if row.host_note() else "")
        )
    return "\n".join(lines), rows


def apart_targets(rows: list[Apart]) -> list[tuple[str, bool]]:
    forward = [row for row in rows if row.direction == "forward"]
    backward = [row for row in rows if row.direction == "backward"]
    return [
        (
            "CUDA forward >= 1.0x torch.compile of F.rms_norm at every GPU-bound shape, fp32, bf16 and fp16",
            all(row.ratio("compiled", "CUDA") >= 1.0 for row in forward),
        ),
        (
            "CUDA backward >= 1.0x the best of F.rms_norm eager and compiled (Liger is not installed here)",
            all(min(row.ratio("compiled", "CUDA"), row.ratio("eager", "CUDA")) >= 1.0 for row in backward),
        ),
        (
            "Triton's forward and backward within 1.25x of CUDA's at every GPU-bound shape and dtype",
            all(row.ratio("Triton", "CUDA") <= 1.25 for row in rows),
        ),
        ("every output of the forward and backward apart right", not any(row.wrong for row in rows)),
    ]


def suite_tables(ext, ceiling) -> tuple[list[str], list[tuple[str, bool]]]:
    """The suite's perf cases at more shapes, the residual add and the backward alone."""
    spec = units.load(UNIT).tests(hidden=True)
    compiled = compiled_suite(spec)
    quant = {
        backend: rows_against(compiled, ext, bf16_cases(spec, "perf_quant", backend, QUANT_COLS), "compiled", ceiling)
        for backend in ("cuda", "triton")
    }
    cuda_vs_eager = rows_against(spec, ext, bf16_cases(spec, "perf_quant", "cuda"), "eager", ceiling)
    residuals = [residual_row(ext, backend, torch.bfloat16, ceiling) for backend in ("cuda", "triton")]
    norms = {
        (backend, label): rows_against(
            suite, ext, bf16_cases(spec, "perf_autograd", backend, shapes=NORM_SHAPES), label, ceiling
        )
        for backend in ("cuda", "triton")
        for label, suite in (("eager", spec), ("compiled", compiled))
    }
    backward, backward_ratios = backward_table(ext)
    tables = [
        bench.format_table(
            quant["cuda"] + cuda_vs_eager, ceiling, "fused RMSNorm + INT8, CUDA: ours vs the unfused PyTorch code"
        ),
        bench.format_table(quant["triton"], ceiling, "fused RMSNorm + INT8, Triton: ours vs the unfused code"),
        bench.format_table(residuals, ceiling, "with the residual add: ours vs the unfused code, compiled"),
        *[
            bench.format_table(rows, ceiling, f"RMSNorm forward + backward, {backend}: ours vs F.rms_norm {label}")
            for (backend, label), rows in norms.items()
        ],
        backward,
    ]
    at_4096 = [r for r in quant["cuda"] if r.d == 4096]
    ratios = [t.ours.median_ms / c.ours.median_ms for t, c in zip(quant["triton"], quant["cuda"])]
    norm_rows = [row for rows in norms.values() for row in rows]
    every = quant["cuda"] + quant["triton"] + cuda_vs_eager + residuals + norm_rows
    targets = [
        (
            "fused CUDA >= 0.85 of the ceiling at 32768x4096 bf16",
            bool(at_4096) and all(r.of_ceiling >= 0.85 for r in at_4096),
        ),
        (
            "fused CUDA and Triton >= 1.0x torch.compile of the unfused code at every D",
            all(r.speedup >= 1.0 for r in quant["cuda"] + quant["triton"]),
        ),
        (
            f"Triton within 1.25x of CUDA at every D (Triton/CUDA time: {', '.join(f'{x:.2f}' for x in ratios)})",
            all(x <= 1.25 for x in ratios),
        ),
        (
            "RMSNorm forward + backward >= 1.0x F.rms_norm, eager and compiled, both backends, GPU-bound shapes",
            all(r.speedup >= 1.0 for r in norm_rows if r.nbytes >= bench.GPU_BOUND_BYTES),
        ),
        (
            "Triton's RMSNorm backward within 1.25x of CUDA's at every D from 768 to 65536, fp32 and bf16",
            all(x <= 1.25 for x in backward_ratios),
        ),
        ("every output right after timing", not any(r.wrong for r in every)),
    ]
    return tables, targets


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--markdown", help="also write the tables as markdown to this file")
    parser.add_argument("--only", choices=("suite", "apart"), help="only the suite's shapes, or only the apart table")
    args = parser.parse_args()
    ext, _ = build_reference(UNIT)
    torch._dynamo.config.cache_size_limit = 64  # a compiled baseline per shape, dtype and grad mode
    ceiling = bench.copy_ceiling_gbs()
    tables, targets = suite_tables(ext, ceiling) if args.only != "apart" else ([], [])
    if args.only != "suite":
        table, rows = apart_table(ext, ceiling)
        tables.append(table)
        targets += apart_targets(rows)
    bench.report(tables, targets, args.markdown)


if __name__ == "__main__":
    main()

"""day09 RMSNorm and fused RMSNorm + INT8: what is correct, what is fast, and the cases.

ext is rmsnorm_int8.py; ext.ops(backend) is torch.ops.rmsnorm_int8 (backend "cuda": the CUDA
kernels, and ATen ones for CPU tensors) or torch.ops.rmsnorm_triton (backend "triton").
A case's inputs name the op they run ("op") and the backend:
- forward: rms_norm(x, weight?, eps) -> (y, rstd), against float64;
- backward_op: rms_norm_backward(dy, x, weight?, rstd) -> (dx, dweight), rstd given;
- autograd: the gradients of ext.rms_norm for x and weight;
- quant: rms_norm_quant(x, weight, eps) -> (q, scale);
- residual: add_rms_norm_quant(x, residual, weight, eps) -> (q, scale) and residual after it;
- opcheck: torch.library.opcheck on one operator (schema, fake kernel, autograd, dispatch);
- compiled: a matmul, rms_norm and rms_norm_quant under torch.compile(fullgraph=True);
- perf cases time rms_norm_quant against the unfused PyTorch version, and forward + backward
  through autograd against F.rms_norm's.

q is right within 1 of the float64 reference everywhere, and equal to it on at least 99.9%
of elements: y is computed in float32, so a y / scale within a rounding of a half may round
either way, and nothing else may.
"""
import math

import torch
import torch.nn.functional as F

from course.cases import FULL_AT, INPUTS_UNCHANGED, ZERO_AT, Case, standard_normal
from course.harness import nan_filled
from course.hints import model_reading, sixteen_bit_grid
from course.ops import Op, flag, gradients

from ..common.error_cases import error_case, spoil

UNIT = "day09_rmsnorm_int8"
# PyTorch ops an op may call beyond course.own_code's structural ones, by op: rmsnorm_triton.py's
# backward sums its kernel's partial dweight rows (one per program, at most the GPU's resident
# programs) with torch, a small share of the call's work that the CUDA backend does in a kernel.
# The perf case times that path; no own-code case runs it.
OWN_CODE_OPS = {"perf_autograd": ("aten::sum",)}
SHORT = {torch.float32: "fp32", torch.float16: "fp16", torch.bfloat16: "bf16", torch.float64: "fp64"}
EXACT_SHARE = 0.999


# ---- inputs ----

def tie_rows(shape, generator):
    """Rows built so that y / scale lands exactly on k + 0.5 for most elements: every row a
    permutation of the same values, one of them 127 and the others k + 0.5, and eps chosen so
    that mean(x²) + eps is a power of 4. Then rstd is a power of 2, scale = rstd, and
    y / scale = x, all exact in float32: only the rounding rule decides q."""
    cols = shape[-1]
    values = torch.randint(0, 127, (cols,), generator=generator).double() + 0.5
    values[0] = 127.0
    row = values * torch.where(torch.rand(cols, generator=generator) < 0.5, -1.0, 1.0)
    rows = [row[torch.randperm(cols, generator=generator)] for _ in range(math.prod(shape[:-1]))]
    mean_square = (row * row).sum().item() / cols
    eps = 4.0 ** (math.floor(math.log(mean_square, 4)) + 1) - mean_square
    return torch.stack(rows).reshape(shape), eps


def make_inputs(case, generator):
    p = case.params
    dtype, shape = p.get("dtype", torch.float32), p["shape"]
    cols = shape[-1]
    x = standard_normal(shape, generator, dtype) * p.get("scale", 1.0)
    weight = standard_normal(cols, generator, dtype)
    eps = p.get("eps", 1e-6)
    if p.get("ties"):
        x, eps = tie_rows(shape, generator)
        weight = torch.ones(cols, dtype=torch.float64)
    if p.get("zero_rows") and x.numel():
        x.reshape(-1, cols)[::2] = 0
    if p.get("huge") and x.numel():
        x.reshape(-1, cols)[:, cols // 3] = 1e4  # one value per row far above the rest
    inputs = {"op": p["op"], "backend": p.get("backend", "cuda"), "x": x.to(dtype), "weight": weight.to(dtype),
              "has_weight": p.get("has_weight", True), "eps": eps, "target": p.get("target", "")}
    if p["op"] in ("backward_op", "autograd", "autograd_no_weight", "perf_autograd"):
        inputs["dy"] = standard_normal(shape, generator, dtype).to(dtype)
    if p["op"] == "backward_op":
        x64 = inputs["x"].double()
        inputs["rstd"] = (x64.square().mean(-1) + eps).rsqrt().to(torch.float64 if dtype == torch.float64
                                                                   else torch.float32)
    if p["op"] in ("residual", "perf_residual") or p.get("target") == "add_rms_norm_quant":
        inputs["residual"] = standard_normal(shape, generator, dtype).to(dtype)
    if p["op"] == "compiled":
        inputs["w1"] = (standard_normal((cols, cols), generator, dtype) / cols ** 0.5).to(dtype)
    return inputs


def on_device(case, inputs):
    """Layouts and spoiled arguments are made here, where the op will see them."""
    if case.params.get("transposed"):
        inputs["x"] = inputs["x"].t().contiguous().t()  # the same values, columns apart in memory
    spoil(case, inputs)
    return inputs


def _weight(inputs):
    return inputs["weight"] if inputs["has_weight"] else None


# ---- the calls ----

def _call_forward(ext, inputs):
    return ext.ops(inputs["backend"]).rms_norm(inputs["x"], _weight(inputs), inputs["eps"])


def _call_backward(ext, inputs):
    return ext.ops(inputs["backend"]).rms_norm_backward(inputs["dy"], inputs["x"], _weight(inputs), inputs["rstd"])


def _call_autograd(ext, inputs):
    def norm(x, weight):
        return ext.rms_norm(x, weight, inputs["eps"], backend=inputs["backend"])
    return gradients(norm, inputs, ("x", "weight"), "dy")


def _call_autograd_no_weight(ext, inputs):
    def norm(x):
        return ext.rms_norm(x, None, inputs["eps"], backend=inputs["backend"])
    return gradients(norm, inputs, ("x",), "dy")


def _call_quant(ext, inputs):
    return ext.ops(inputs["backend"]).rms_norm_quant(inputs["x"], inputs["weight"], inputs["eps"])


def _call_quant_as_users_do(ext, inputs):
    return ext.rms_norm_quant(inputs["x"], inputs["weight"], inputs["eps"], backend=inputs["backend"])


def _call_residual(ext, inputs):
    q, scale = ext.ops(inputs["backend"]).add_rms_norm_quant(inputs["x"], inputs["residual"], inputs["weight"],
                                                             inputs["eps"])
    return q, scale, inputs["residual"]


def _call_opcheck(ext, inputs):
    target = inputs["target"]
    op = getattr(ext.ops(inputs["backend"]), target).default
    if target == "rms_norm":  # differentiable: opcheck compares its autograd with the registration
        args = (inputs["x"].detach().requires_grad_(), inputs["weight"].detach().requires_grad_(), inputs["eps"])
    elif target == "rms_norm_quant":
        args = (inputs["x"], inputs["weight"], inputs["eps"])
    else:
        args = (inputs["x"], inputs["residual"], inputs["weight"], inputs["eps"])
    report = torch.library.opcheck(op, args)
    failed = {test: str(result)[:300] for test, result in report.items() if result != "SUCCESS"}
    if failed:
        raise AssertionError("torch.library.opcheck failed: " + "; ".join(f"{t}: {r}" for t, r in failed.items()))
    return torch.tensor(True)


def _call_compiled(ext, inputs):
    backend = inputs["backend"]

    def block(x, w1, weight):
        h = ext.rms_norm(x @ w1, weight, inputs["eps"], backend=backend)
        q, scale = ext.rms_norm_quant(h, weight, inputs["eps"], backend=backend)
        return h, q, scale
    torch._dynamo.reset()
    compiled = torch.compile(block, fullgraph=True, backend="inductor" if inputs["x"].is_cuda else "aot_eager")
    with torch.no_grad():
        return compiled(inputs["x"], inputs["w1"], inputs["weight"])


def baseline(inputs):
    """What a perf case is measured against: the unfused PyTorch version on the same inputs
    (rms_norm_quant), or F.rms_norm through autograd."""
    if inputs["op"] == "perf_quant":
        y = F.rms_norm(inputs["x"].float(), inputs["x"].shape[-1:], inputs["weight"].float(), inputs["eps"])
        scale = y.abs().amax(-1, keepdim=True) / 127
        q = torch.where(scale == 0, 0.0, torch.round(y / scale)).clamp(-127, 127).to(torch.int8)
        return q, scale.squeeze(-1)
    leaves = tuple(inputs[name].detach().requires_grad_() for name in ("x", "weight"))
    y = F.rms_norm(leaves[0], leaves[0].shape[-1:], leaves[1], inputs["eps"])
    return torch.autograd.grad(y, leaves, inputs["dy"])


def bytes_moved(inputs):
    """The least each op moves: quant reads x and writes q (1 byte) and a scale per row;
    forward + backward read x, write y; read dy and x, write dx."""
    x = inputs["x"]
    if inputs["op"] == "perf_quant":
        return x.numel() * (x.element_size() + 1) + 4 * (x.numel() // x.shape[-1])
    return 5 * x.numel() * x.element_size()


# ---- what is right: float64 on the inputs as given ----

def _rstd64(x64, eps):
    return (x64.square().mean(-1, keepdim=True) + eps).rsqrt()


def _weight64(inputs):
    return inputs["weight"].double() if inputs["has_weight"] else torch.ones(inputs["x"].shape[-1],
                                                                               dtype=torch.float64)


def _forward_reference(inputs):
    x = inputs["x"].double()
    rstd = _rstd64(x, inputs["eps"])
    return x * rstd * _weight64(inputs), rstd.squeeze(-1)


def _gradients64(x, weight, dy, rstd):
    """dx = rstd · (g − x̂ · mean(g · x̂)), dweight = Σ_rows dy · x̂, for rstd [..., 1]."""
    x_hat, g = x * rstd, dy * weight
    dx = rstd * (g - x_hat * (g * x_hat).mean(-1, keepdim=True))
    return dx, (dy * x_hat).reshape(-1, x.shape[-1]).sum(0)


def _backward_reference(inputs):
    return _gradients64(inputs["x"].double(), _weight64(inputs), inputs["dy"].double(),
                        inputs["rstd"].double().unsqueeze(-1))


def _autograd_reference(inputs):
    x = inputs["x"].double()
    return _gradients64(x, _weight64(inputs), inputs["dy"].double(), _rstd64(x, inputs["eps"]))


def quantize64(y):
    """scale = max|y| / 127 per row, q = clamp(round(y / scale), −127, 127), half to even; 0 and
    0 for a row of zeros."""
    scale = y.abs().amax(-1, keepdim=True) / 127
    q = torch.where(scale == 0, 0.0, torch.round(y / torch.where(scale == 0, 1.0, scale))).clamp(-127, 127)
    return q, scale.squeeze(-1)


def _quant_reference(inputs, x=None):
    x = inputs["x"].double() if x is None else x
    return quantize64(x * _rstd64(x, inputs["eps"]) * inputs["weight"].double())


def _residual_reference(inputs):
    # The sum rounded to the dtype, as the residual stream keeps it, is what is normalized.
    residual = (inputs["x"].double() + inputs["residual"].double()).to(inputs["x"].dtype).double()
    return (*_quant_reference(inputs, residual), residual)


def _compiled_reference(inputs):
    h = inputs["x"].double() @ inputs["w1"].double()
    y = h * _rstd64(h, inputs["eps"]) * inputs["weight"].double()
    return (y, *_quant_reference(inputs, y.to(inputs["x"].dtype).double()))


# ---- how far from it an answer may be ----
# Everything runs in float32 (float64 for float64 x) on exact inputs. A sum of D terms by a
# tree loses about log2(D) roundings; rstd, a square root and a division, and each product a
# few more: `roundings` of the accumulation type, relative. The output's own rounding adds
# half an ulp of its dtype. dx also suffers cancellation: its error is relative to the terms
# it subtracts (|g| and |x̂ · mean(g x̂)|), not to dx.

def _acc_eps(dtype):
    return torch.finfo(torch.float64 if dtype == torch.float64 else torch.float32).eps


def _roundings(count):
    return math.log2(max(count, 2)) + 8


def _forward_tolerance(inputs):
    x = inputs["x"]
    dtype = x.dtype
    relative = _roundings(x.shape[-1]) * _acc_eps(dtype)
    tiny = torch.finfo(dtype).smallest_normal
    return {"y": (tiny, relative + torch.finfo(dtype).eps / 2), "rstd": (0.0, relative)}


def _backward_tolerance(inputs):
    x64, dy64, weight = inputs["x"].double(), inputs["dy"].double(), _weight64(inputs)
    dtype, cols = inputs["x"].dtype, inputs["x"].shape[-1]
    if not x64.numel():
        return {"dx": (0.0, 0.0), "dweight": (0.0, 0.0)}
    rstd = _rstd64(x64, inputs["eps"])
    xhat, g = x64 * rstd, dy64 * weight
    terms = rstd * (g.abs() + xhat.abs() * (g * xhat).abs().mean(-1, keepdim=True))
    rows = x64.numel() // cols
    column_terms = (dy64 * xhat).abs().reshape(-1, cols).sum(0)
    acc, out = _acc_eps(dtype), torch.finfo(dtype).eps / 2
    return {"dx": (2 * _roundings(cols) * acc * terms.max().item(), out),
            "dweight": (2 * _roundings(rows * cols) * acc * column_terms.max().item(), out)}


def _quant_tolerance(inputs):
    # q: one either way at a near tie. scale: float32's roundings of y's, and the issue's
    # 1e-5 bound covers them up to D = 16384 in every dtype (the inputs are exact; y never
    # rounds to the dtype).
    return {"q": (1.0, 0.0), "scale": (0.0, 1e-5),
            "residual": (0.0, torch.finfo(inputs["x"].dtype).eps / 2)}


def _compiled_tolerance(inputs):
    """The matmul rounds in float32 too: a few roundings of outputs of about 1. q's near ties
    are judged as elsewhere."""
    return {"y": (1e-4, 1e-4), "q": (1.0, 0.0), "scale": (0.0, 1e-4)}


def _dtypes(*kinds):
    """The outputs' dtypes by kind: "x" is x's dtype, "stats" float32 (float64 for float64 x)."""
    def dtypes(inputs):
        x = inputs["x"].dtype
        named = {"x": x, "stats": torch.float64 if x == torch.float64 else torch.float32, "int8": torch.int8,
                 "float32": torch.float32}
        return tuple(named[kind] for kind in kinds)
    return dtypes


QUANT_EXACT = (("q", EXACT_SHARE),)


# ---- what a wrong q or scale says: a model of the usual slip, and what the scale reads back to ----

def _quantized64(inputs):
    """The rows the quantization normalizes, in float64: x, or x + residual rounded to the dtype,
    or (compiled) the block's rms_norm output rounded to it."""
    if inputs["op"] == "residual":
        return _residual_reference(inputs)[2]
    if inputs["op"] == "compiled":
        return _compiled_reference(inputs)[0].to(inputs["x"].dtype).double()
    return inputs["x"].double()


def _quant_slips(name, inputs):
    """q and scale as the usual slip makes them: the max taken of |x · rstd|, before the weight."""
    if name not in ("q", "scale"):
        return {}
    x = _quantized64(inputs)
    normalized = x * _rstd64(x, inputs["eps"])
    y = normalized * inputs["weight"].double()
    scale = normalized.abs().amax(-1, keepdim=True) / 127
    q = torch.where(scale == 0, 0.0, torch.round(y / torch.where(scale == 0, 1.0, scale))).clamp(-127, 127)
    line = (f"{name} matches a quantization whose scale is max|x · rstd| / 127, taken before the weight is "
            "applied: check what the max is taken of")
    return {line: q if name == "q" else scale.squeeze(-1)}


SUM_READ_BACK = 4e-6  # how far float32's roundings (rstd, y, the max, / 127) move the sum read back, relative


def _sums_read_back(got, inputs):
    """(the sum of squares each row's scale implies, its uncertainty, the row's own sum, where
    the scale differs from the reference's): scale = max|x · w| · rstd / 127, rstd = 1 / sqrt(sum / D
    + eps), read back. NaN where the scale cannot be read (a row of zeros, a scale of 0)."""
    x = _quantized64(inputs).reshape(-1, inputs["x"].shape[-1])
    cols, eps = x.shape[-1], inputs["eps"]
    peak = (x * inputs["weight"].double()).abs().amax(-1)
    scale = got.double().reshape(-1)
    readable = (peak > 0) & (scale > 0) & torch.isfinite(scale)
    rstd = torch.where(readable, 127 * scale / torch.where(readable, peak, 1.0), float("nan"))
    implied = cols * (rstd ** -2 - eps)
    right = _quant_reference(inputs, x)[1].reshape(-1)
    atol, rtol = _quant_tolerance(inputs)["scale"]
    wrong = ~((scale - right).abs() <= atol + rtol * right.abs())
    return implied, SUM_READ_BACK * (implied + cols * eps), (x * x).sum(-1), wrong


def _read_scale(got, inputs):
    """What a wrong scale reads back to: a sum of squares kept in 16 bits (on its grid, or past
    float16's largest where the scale came out 0), or one larger than the row's own."""
    implied, uncertainty, own, wrong = _sums_read_back(got, inputs)
    if wrong.sum() < 2:
        return []
    overflowed = wrong & (got.double().reshape(-1) == 0) & (own > torch.finfo(torch.float16).max)
    grid = sixteen_bit_grid(implied[wrong & ~overflowed], uncertainty[wrong & ~overflowed])
    if grid is not None or (overflowed == wrong).all():
        kept = grid or torch.float16
        past = (f"; the scale is 0 in {int(overflowed.sum())} rows whose sum passes {torch.finfo(kept).max:g}, "
                f"{kept}'s largest" if overflowed.any() else "")
        return [f"each wrong scale reads back to a sum of squares on {kept}'s grid{past}: the sum of squares is "
                f"kept in {kept}; check the type each sum is kept in"]
    read = wrong & torch.isfinite(implied)
    excess = (implied - own)[read] / own[read]
    if read.sum() >= max(2, wrong.sum() / 2) and (excess > 8 * SUM_READ_BACK).all():
        return [f"each wrong scale reads back to a sum of squares larger than its row's own (by {excess.min():.3g} "
                f"to {excess.max():.3g} of it): values from outside the row are added in; check what the lanes past "
                "the row's end load"]
    return []


def _diagnose_quant(reference):
    """The slip's model where q or scale follows it; else what a wrong scale reads back to."""
    slips = model_reading(_quant_slips, reference, ("q", "scale"), _quant_tolerance)

    def diagnose(name, got, inputs):
        found = slips(name, got, inputs)
        if found or name != "scale" or inputs["op"] == "compiled" or not got.numel():
            return found
        return _read_scale(got, inputs)
    return diagnose


OPS = {
    "forward": Op(nan_filled(_call_forward), _forward_reference, ("y", "rstd"), _dtypes("x", "stats"),
                  _forward_tolerance),
    "backward_op": Op(nan_filled(_call_backward), _backward_reference, ("dx", "dweight"), _dtypes("x", "x"),
                      _backward_tolerance),
    "autograd": Op(nan_filled(_call_autograd), _autograd_reference, ("dx", "dweight"), _dtypes("x", "x"),
                   _backward_tolerance),
    "autograd_no_weight": Op(nan_filled(_call_autograd_no_weight), lambda inputs: _autograd_reference(inputs)[:1],
                             ("dx",), _dtypes("x"), lambda inputs: {"dx": _backward_tolerance(inputs)["dx"]}),
    "quant": Op(nan_filled(_call_quant), _quant_reference, ("q", "scale"), _dtypes("int8", "float32"),
                _quant_tolerance, QUANT_EXACT, diagnose=_diagnose_quant(_quant_reference)),
    "residual": Op(nan_filled(_call_residual), _residual_reference, ("q", "scale", "residual"),
                   _dtypes("int8", "float32", "x"), _quant_tolerance, QUANT_EXACT, in_place=("residual",),
                   diagnose=_diagnose_quant(_residual_reference)),
    "opcheck": flag(_call_opcheck, "opcheck"),
    "compiled": Op(_call_compiled, _compiled_reference, ("y", "q", "scale"), _dtypes("x", "int8", "float32"),
                   _compiled_tolerance, QUANT_EXACT,
                   diagnose=model_reading(_quant_slips, _compiled_reference, ("y", "q", "scale"), _compiled_tolerance)),
    "perf_quant": Op(_call_quant_as_users_do, _quant_reference, ("q", "scale"), _dtypes("int8", "float32"),
                     _quant_tolerance, QUANT_EXACT, diagnose=_diagnose_quant(_quant_reference)),
    "perf_autograd": Op(_call_autograd, _autograd_reference, ("dx", "dweight"), _dtypes("x", "x"),
                        _backward_tolerance),
}


# What each op runs of the code students write ("file, function", as its TODO line names it), by
# path: a public test runs as soon as its op's are written (course/todos.py), so the forward
# before the backward, the CPU before the kernels, the operators before the schema. Each op
# refuses to run while its own are unwritten (rmsnorm_ops.cpp, rmsnorm_triton.py).
CUDA_FORWARD = ("rmsnorm_forward.cu, rms_norm_forward_kernel",)
CUDA_BACKWARD = ("rmsnorm_backward.cu, rms_norm_backward_kernel",)
CUDA_QUANT = ("rmsnorm_quant.cu, rms_norm_quant_kernel", "rmsnorm_row.cuh, quantize_int8")
CPU_QUANT = ("rmsnorm_ops.cpp, quantize_rows_cpu",)
SCHEMA = ("rmsnorm_ops.cpp, TORCH_LIBRARY(rmsnorm_int8, m)",)
FAKE = ("rmsnorm_int8.py, _rms_norm_quant_fake",)  # what torch.compile and opcheck trace the C++ quantization with
TRITON_FORWARD = ("rmsnorm_triton.py, rms_norm_forward_kernel",)
TRITON_BACKWARD = ("rmsnorm_triton.py, rms_norm_backward_kernel",)
TRITON_QUANT = ("rmsnorm_triton.py, rms_norm_quant_kernel", "rmsnorm_triton.py, rms_norm_quant_long_kernel")
QUANT = {"cpu": CPU_QUANT, "cuda": CUDA_QUANT, "triton": TRITON_QUANT}
RESIDUAL = {"cpu": CPU_QUANT + SCHEMA, "cuda": CUDA_QUANT + SCHEMA, "triton": TRITON_QUANT}
FORWARD = {"cuda": CUDA_FORWARD, "triton": TRITON_FORWARD}
AUTOGRAD = {"cuda": CUDA_FORWARD + CUDA_BACKWARD, "triton": TRITON_FORWARD + TRITON_BACKWARD}


def _traced(by_path):
    """What tracing an op needs: the op's functions and, for the C++ one, its fake kernel."""
    return {path: functions + (FAKE if path != "triton" else ()) for path, functions in by_path.items()}


FUNCTIONS_RUN = {
    "forward": FORWARD,
    "backward_op": {"cuda": CUDA_BACKWARD, "triton": TRITON_BACKWARD},
    "autograd": AUTOGRAD,
    "autograd_no_weight": AUTOGRAD,
    "quant": QUANT,
    "residual": RESIDUAL,
    "opcheck rms_norm": AUTOGRAD,
    "opcheck rms_norm_quant": _traced(QUANT),
    "opcheck add_rms_norm_quant": _traced(RESIDUAL),
    "compiled": _traced({path: FORWARD.get(path, ()) + functions for path, functions in QUANT.items()}),
    "perf_quant": QUANT,
    "perf_autograd": AUTOGRAD,
}


# ---- the cases ----

HINTS = {
    "forward": "rstd = 1 / sqrt(mean(x²) + eps) over the last dimension in float32; y = x * rstd * weight, rounded "
               "to x's dtype once; a missing weight counts as ones",
    "backward_op": "with x̂ = x * rstd and g = dy * w: dx = rstd * (g - x̂ * mean(g * x̂)); dweight sums dy * x̂ "
                   "over every row",
    "autograd": "the autograd formula calls rms_norm_backward with the rstd the forward saved",
    "quant": "scale = max|y| / 127 with y = x * rstd * weight in float32 (the weight applied before the max); "
             "q = clamp(round(y / scale), -127, 127), rounding half to even",
    "residual": "residual = x + residual, rounded to the dtype and written back in place; then quantize "
                "rms_norm(residual) * weight",
    "ties": "these rows put y / scale exactly on k + 0.5: round half to even (rint, __float2int_rn, torch.round), "
            "not half away from zero (roundf, round)",
    "zeros": "a row of zeros has max|y| = 0: its scale is 0 and its q 0, with no 0 / 0",
    "tail": "D is not a power of two here: lanes past the row's end must read 0 (masked), or the next row leaks in",
    "opcheck": "opcheck tests the schema (does the op write an argument it does not declare with `!`?), the fake "
               "kernel (the same shapes, dtypes and devices as the real one) and the autograd registration",
    "compiled": "a graph break or a missing fake kernel: torch.compile(fullgraph=True) must trace every op; in "
                "Triton, float arguments arrive as float64 from its launcher: cast eps with tl.cast(eps, tl.float32)",
    "checks": "check the arguments before launching, and name the argument in the message",
}

FP16, BF16, FP32, FP64 = torch.float16, torch.bfloat16, torch.float32, torch.float64


def case(op, backend, dtype, shape, what="", device="cuda", points=1.0, hint="", checks=None, group="", **params):
    """A values case named {cpu|cuda|triton}_{op}_{dtype}[_{what}]; backend "cuda" on the CPU
    runs the C++ op's CPU kernels. A Triton case declared bf16 runs in fp16 where Triton cannot
    compile bf16 for the GPU (course/dtypes.py)."""
    prefix = "cpu" if device == "cpu" else backend
    name = "_".join(filter(None, (prefix, op, SHORT[dtype], what)))
    if checks is None:
        checks = () if op in ("residual", "opcheck", "compiled") else (INPUTS_UNCHANGED,)
    return Case(name, group or f"{prefix}_{op}", device, points,
                dict(op=op, backend=backend, dtype=dtype, shape=shape, **params), checks=checks,
                hint=hint or HINTS.get(op, ""), triton=prefix == "triton")


def opcheck(backend, target, dtype=FP32, device="cuda"):
    prefix = "cpu" if device == "cpu" else backend
    # opcheck traces and compiles the op several times, and Triton compiles each kernel cold.
    return Case(f"{prefix}_opcheck_{target}", f"{prefix}_package", device, 1.0,
                dict(op="opcheck", backend=backend, dtype=dtype, shape=(8, 64), target=target), timeout=120.0,
                hint=HINTS["opcheck"], triton=prefix == "triton")


def compiled(backend, device="cuda"):
    prefix = "cpu" if device == "cpu" else backend
    return Case(f"{prefix}_compiled_block", f"{prefix}_package", device, 1.0,
                dict(op="compiled", backend=backend, dtype=FP32, shape=(32, 256)), timeout=120.0,
                hint=HINTS["compiled"], triton=prefix == "triton")


# Each op's arguments, x first: an error message names its own and no other but x.
ARGUMENTS = {"quant": ("x", "weight", "eps"), "residual": ("x", "residual", "weight", "eps")}


def error(name, words, op="quant", backend="cuda", device="cuda", **bad):
    return error_case(name, words, HINTS["checks"], ARGUMENTS[op], device,
                      group=f"{'cpu' if device == 'cpu' else backend}_errors", op=op, backend=backend, bad=bad)


def perf(op, backend, dtype, shape, zero_at=ZERO_AT, points=2.0, hint="", **params):
    needs = (f"{backend}_quant_*",) if op == "perf_quant" else (f"{backend}_forward_*", f"{backend}_autograd_*")
    return Case(f"{backend}_{op}_{SHORT[dtype]}", f"{backend}_perf", "cuda", points,
                dict(op=op, backend=backend, dtype=dtype, shape=shape, full_at=FULL_AT, zero_at=zero_at, **params),
                kind="perf", timeout=180.0, needs=needs, hint=hint, triton=backend == "triton")


# D = 4096, a model's width. Twice 16384 rows, where the host's launch of a Triton kernel took
# longer than the GPU's work on an H100 and set the time (docs/performance.md); no more, since
# the float64 inputs and answer live in host memory (a Colab runtime has 12 GB).
QUANT_PERF_SHAPE = (32768, 4096)
# Unfused, PyTorch makes about ten passes over the tensor (casts, the norm, abs, max, divide,
# round, clamp, cast); fused, one. No points at a quarter of the fused reference's speed, where
# a kernel that does not fuse lands.
QUANT_ZERO_AT = 0.225
QUANT_PERF_HINT = "is the row read once (held in registers), and are loads and stores 16 bytes wide?"
# Large enough that the GPU's work, not the host's (Python autograd's thread hand-off, about
# 0.4 ms a step for the Triton ops on an H100: docs/performance.md), sets the time.
AUTOGRAD_PERF_SHAPE = (16384, 8192)

CASES = [
    case("forward", "cuda", FP32, (64, 256), device="cpu"),
    case("quant", "cuda", FP32, (64, 256), device="cpu"),
    case("quant", "cuda", FP32, (16, 64), "ties", device="cpu", ties=True, hint=HINTS["ties"]),
    case("residual", "cuda", FP32, (32, 128), device="cpu"),
    opcheck("cuda", "add_rms_norm_quant", device="cpu"),
    case("forward", "cuda", BF16, (256, 1024)),
    case("backward_op", "cuda", FP32, (512, 768)),
    case("quant", "cuda", BF16, (256, 4096)),
    case("quant", "cuda", FP32, (50, 1000), "tail", hint=HINTS["tail"]),
    case("quant", "cuda", FP32, (64, 64), "ties", ties=True, hint=HINTS["ties"]),
    case("residual", "cuda", BF16, (64, 2048)),
    opcheck("cuda", "rms_norm_quant"),
    case("forward", "triton", FP16, (128, 1024)),
    case("autograd", "triton", FP32, (128, 1000)),
    case("quant", "triton", BF16, (256, 4096)),
    case("quant", "triton", FP32, (50, 1000), "tail", hint=HINTS["tail"]),
    case("residual", "triton", FP16, (33, 1000)),
    compiled("triton"),
    # reference_vs_torch: the notebook's estimate (course/cases.py), from docs/performance.md
    perf("perf_quant", "cuda", BF16, QUANT_PERF_SHAPE, QUANT_ZERO_AT, hint=QUANT_PERF_HINT, reference_vs_torch=24.7),
    perf("perf_quant", "triton", BF16, QUANT_PERF_SHAPE, QUANT_ZERO_AT, hint=QUANT_PERF_HINT,
         reference_vs_torch=25.1),
]

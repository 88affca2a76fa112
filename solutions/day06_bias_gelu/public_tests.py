"""day06 fused bias + GELU at the bandwidth limit: what is correct, what is fast, and the cases.

forward(x [..., N], bias [N], approximate) -> y = gelu(x + bias)                  compiled
backward(dy [..., N], x, bias, approximate) -> (dx, dbias)                        compiled
bias_gelu(x, bias, approximate="none") -> y, differentiable                       bias_gelu.py

approximate is "none" (the erf form) or "tanh", as in torch.nn.functional.gelu. A case's inputs
name what it runs ("op"):
- forward, backward: the compiled ops (backward: dx = dy * gelu'(x + bias), dbias = dx summed
  over every row);
- autograd: the gradients of bias_gelu through autograd;
- gradcheck: torch.autograd.gradcheck's test of bias_gelu in float64, judged from the raw data
  (course.ops.jacobian_probe);
- rerun: the compiled backward twice on the same inputs; the second must give the same bits;
- perf cases time forward or backward against eager PyTorch on the same inputs:
  F.gelu(x + bias), and the backward of that through autograd.
Every compiled op runs under torch.use_deterministic_algorithms(True), which makes at::empty hand
out memory filled with NaN: an output element that is never written shows up as NaN.
"""
import torch
import torch.nn.functional as F

from course.cases import FULL_AT, INPUTS_UNCHANGED, Case, standard_normal
from course.harness import nan_filled
from course.hints import followed_model, model_reading, one_strip
from course.ops import EXACT, Op, dtypes_like, gradcheck_op, gradients, jacobian_probe

from ..common.error_cases import error_case, spoil
from ..common.layouts import LAYOUTS

UNIT = "day06_bias_gelu"
DY_MEAN = 0.5  # dy does not average to 0, so that dbias grows with the rows and a lost row shows
# What extreme cases put into x: GELU must saturate to exactly x + bias or 0 there, never NaN.
EXTREMES = (20.0, -20.0, 1e4, -1e4)
FP16_EXTREMES = EXTREMES + (65504.0, -65504.0, 60000.0)  # float16's largest; x + bias rounds back to it
RERUN_OUTPUTS = ("dx", "dbias", "dx change on rerun", "dbias change on rerun")


# ---- inputs ----

def _extremes(x, generator, dtype):
    """x with about a quarter of its elements replaced by EXTREMES (FP16_EXTREMES for float16)."""
    values = torch.tensor(FP16_EXTREMES if dtype == torch.float16 else EXTREMES, dtype=torch.float64)
    mask = torch.rand(x.shape, generator=generator) < 0.25
    picks = values[torch.randint(len(values), x.shape, generator=generator)]
    return torch.where(mask, picks, x)


def make_inputs(case, generator):
    p = case.params
    op, dtype, shape = p["op"], p.get("dtype", torch.float32), p["shape"]
    x = standard_normal(shape, generator, dtype)
    if p.get("extreme"):
        x = _extremes(x, generator, dtype)
    bias = standard_normal(shape[-1], generator, dtype)
    inputs = {"op": op, "approximate": p.get("approximate", "none"), "x": x.to(dtype), "bias": bias.to(dtype)}
    if op in ("backward", "autograd", "rerun"):
        inputs["dy"] = (standard_normal(shape, generator, dtype) + DY_MEAN).to(dtype)
    return inputs


def _eager_graph(inputs):
    """What eager autograd's forward of F.gelu(x + bias) leaves for its backward: a perf case
    times only that backward, as ours is timed only in backward."""
    x = inputs["x"].detach().requires_grad_()  # new leaves on the same memory
    bias = inputs["bias"].detach().requires_grad_()
    inputs.update(eager_x=x, eager_bias=bias, eager_y=F.gelu(x + bias, approximate=inputs["approximate"]))


def on_device(case, inputs):
    """Layouts, spoiled arguments and eager's graph are made here, where the op will see them."""
    for name, layout in case.params.get("layouts", {}).items():
        inputs[name] = LAYOUTS[layout](inputs[name])
    spoil(case, inputs)
    if case.kind == "perf" and inputs["op"] == "backward":
        _eager_graph(inputs)
    return inputs


# ---- the calls: `ext` is the unit's entry module, bias_gelu.py; ext._ext is the compiled extension ----

def _forward(ext, inputs):
    return ext._ext.forward(inputs["x"], inputs["bias"], inputs["approximate"])


def _backward(ext, inputs):
    return ext._ext.backward(inputs["dy"], inputs["x"], inputs["bias"], inputs["approximate"])


def _rerun(ext, inputs):
    first = _backward(ext, inputs)
    second = _backward(ext, inputs)
    return (*first, *(b - a for a, b in zip(first, second)))


def _bias_gelu_of(ext, inputs):
    return lambda x, bias: ext.bias_gelu(x, bias, inputs["approximate"])


def _autograd(ext, inputs):
    return gradients(_bias_gelu_of(ext, inputs), inputs, ("x", "bias"), "dy")


GRADCHECK_INPUTS = ("x", "bias")  # what gradcheck nudges and differentiates for


def _gradcheck(ext, inputs):
    return jacobian_probe(_bias_gelu_of(ext, inputs), inputs, GRADCHECK_INPUTS)


def baseline(inputs):
    """Eager PyTorch on the same inputs, what a perf case is measured against: F.gelu(x + bias),
    or the backward of that through autograd (on the graph on_device made)."""
    if inputs["op"] == "forward":
        return F.gelu(inputs["x"] + inputs["bias"], approximate=inputs["approximate"])
    return torch.autograd.grad(inputs["eager_y"], (inputs["eager_x"], inputs["eager_bias"]), inputs["dy"],
                               retain_graph=True)


def _element_bytes(dtype):
    return torch.finfo(dtype).bits // 8


def bytes_moved(inputs):
    """What the op must move at the least: forward reads x and bias and writes y; backward reads
    dy, x and bias and writes dx and dbias. Partial sums that stay on the chip are not counted."""
    x = inputs["x"]
    cols = x.shape[-1]
    if inputs["op"] == "forward":
        return _element_bytes(x.dtype) * (2 * x.numel() + cols)
    return _element_bytes(x.dtype) * (3 * x.numel() + 2 * cols)


# ---- what is right: float64 on the inputs as given (fp16 and bf16 ones already rounded) ----

def _forward_reference(inputs):
    return (F.gelu(inputs["x"].double() + inputs["bias"].double(), approximate=inputs["approximate"]),)


def _gradients_reference(inputs):
    """PyTorch's own float64 GELU and autograd: a derivation independent of the kernels'."""
    x = inputs["x"].double().requires_grad_()
    bias = inputs["bias"].double().requires_grad_()
    y = F.gelu(x + bias, approximate=inputs["approximate"])
    return torch.autograd.grad(y, (x, bias), inputs["dy"].double())


def _rerun_reference(inputs):
    dx, dbias = _gradients_reference(inputs)
    return dx, dbias, torch.zeros_like(dx), torch.zeros_like(dbias)


# How far from it an answer may be. The op computes u = x + bias and GELU in the op-math type
# (float32 for fp16 and bf16, float64 for fp64) and rounds each output once to its dtype. So:
# - y: ROUNDINGS roundings of the op-math type, relative to y for u > 0 (where y ~ u) and absolute
#   where y is near 0 (u < 0: there 1 + erf(u/√2) and 1 + tanh(a) cancel, and an error of a few
#   roundings of 1 is left, times |u|/2 <= 3 before erf and tanh reach -1 exactly), plus the
#   output's rounding: OUTPUT_ROUNDINGS half-ulps of the dtype, relative to y;
# - dx = dy * gelu'(u): the same relative to dx, and absolute times max |dy| (the tanh form's
#   1 - t^2 cancels too, by a few roundings of 1 times |u|(1 + 0.134 u^2)/2 <= 8);
# - dbias, a column sum of M terms accumulated in the op-math type: ROUNDINGS roundings of the
#   largest column sum of |dy| (|gelu'| <= 1.13, and no summation order the kernels use grows a
#   rounding error faster), plus the output's rounding relative to dbias.
# One half-ulp is what rounding to nearest can cost, at most: a right answer never needs more.
# Right answers land well inside; the tanh form computed as erf is off by up to 4.7e-4 (1e-1
# relative) around u = -2.7, where it fails even a bf16 case's 4e-3 relative; a dbias summed in
# 16 bits is off by several half-ulps.
ROUNDINGS = 32
OUTPUT_ROUNDINGS = 1
OPMATH = {torch.float16: torch.float32, torch.bfloat16: torch.float32, torch.float32: torch.float32,
          torch.float64: torch.float64}


def _roundings(dtype):
    """(ROUNDINGS roundings of dtype's op-math type, OUTPUT_ROUNDINGS half-ulps of dtype), relative."""
    return ROUNDINGS * torch.finfo(OPMATH[dtype]).eps, OUTPUT_ROUNDINGS * torch.finfo(dtype).eps / 2


def _max_abs(t):
    return t.abs().max().item() if t.numel() else 0.0


def _forward_tolerance(inputs):
    op_math, output = _roundings(inputs["x"].dtype)
    return {"y": (op_math, op_math + output)}


def _gradient_tolerance(inputs):
    op_math, output = _roundings(inputs["x"].dtype)
    dy = inputs["dy"].double()
    column_sums = dy.reshape(-1, dy.shape[-1]).abs().sum(dim=0) if dy.shape[-1] else dy
    return {"dx": (op_math * _max_abs(dy), op_math + output), "dbias": (op_math * _max_abs(column_sums), output)}


def _rerun_tolerance(inputs):
    """The gradients' tolerance for dx and dbias; none for the changes: the same bits twice."""
    allowed = _gradient_tolerance(inputs)
    return {name: allowed.get(name, EXACT) for name in RERUN_OUTPUTS}



# ---- what a wrong dx says: which term of gelu'(u) is off ----
# dx = dy * gelu'(u), u = x + bias: where dy is not tiny, dx / dy is the derivative the op used,
# compared with the right one (float64 autograd of F.gelu) and with the usual slips of each
# form's derivation. The elements of the first DIAGNOSED rows are enough to tell them apart.
DIAGNOSED = 1 << 16  # elements
DY_FLOOR = 1 / 16  # of max |dy|: below it, dx / dy magnifies dx's rounding
SQRT_2_OVER_PI, CUBIC = (2 / torch.pi) ** 0.5, 0.044715


def _erf_slips(u):
    cdf, pdf = 0.5 * (1 + torch.erf(u / 2**0.5)), torch.exp(-0.5 * u * u) / (2 * torch.pi) ** 0.5
    return {
        "Φ(u) alone: the u·φ(u) term is missing": cdf,
        "Φ(u) + φ(u): the second term is u·φ(u), φ times u": cdf + pdf,
        "(1 + erf(u))/2 + u·φ(u): Φ(u) is (1 + erf(u/√2))/2, erf of u/√2, not of u": 0.5 * (1 + torch.erf(u)) + u * pdf,
    }


def _tanh_slips(u):
    t = torch.tanh(SQRT_2_OVER_PI * (u + CUBIC * u**3))
    cubic = 1 + 3 * CUBIC * u * u  # a'(u) / √(2/π), a(u) = √(2/π)·(u + 0.044715·u³)
    half, slope = 0.5 * (1 + t), 0.5 * u * (1 - t * t)
    return {
        "(1 + t)/2 alone: the u·(1 − t²)/2 · a'(u) term is missing": half,
        "(1 + t)/2 + u·(1 − t)/2 · a'(u): tanh' is 1 − t², not 1 − t": (
            half + 0.5 * u * (1 - t) * SQRT_2_OVER_PI * cubic),
        "(1 + t)/2 + u·(1 − t²)/2 · √(2/π): a'(u) lacks its factor 1 + 3·0.044715·u², the cubic's derivative": (
            half + slope * SQRT_2_OVER_PI),
        "(1 + t)/2 + u·(1 − t²)/2 · √(2/π)·(1 + 0.044715·u²): d/du of 0.044715·u³ is 3·0.044715·u²": (
            half + slope * SQRT_2_OVER_PI * (1 + CUBIC * u * u)),
        "(1 + t)/2 + u·(1 − t²)/2 · (1 + 3·0.044715·u²): a'(u) lacks its factor √(2/π)": half + slope * cubic,
        "the erf form's derivative, where approximate='tanh' asks for the tanh form's": _derivative(u, "none"),
        **{f"the tanh form's derivative with the cubic coefficient {c:g}, not 0.044715": _derivative_with(u, c)
           for c in DECIMAL_SLIPS},
    }


DECIMAL_SLIPS = (CUBIC / 10, CUBIC * 10)  # 0.044715 typed a decimal place off


def _tanh_form(u, cubic):
    return 0.5 * u * (1 + torch.tanh(SQRT_2_OVER_PI * (u + cubic * u**3)))


def _derivative_with(u, cubic):
    """The tanh form's derivative with another cubic coefficient, by float64 autograd."""
    u = u.detach().requires_grad_()
    (grad,) = torch.autograd.grad(_tanh_form(u, cubic).sum(), u)
    return grad


def _forward_slips(name, inputs):
    """The forward's slips, as the y they give: the other form, a decimal slip in the cubic."""
    u = inputs["x"].double() + inputs["bias"].double()
    if inputs["approximate"] == "tanh":
        return {"y matches the erf form of gelu, where approximate='tanh' asks for the tanh form: check how "
                "the form is chosen": F.gelu(u),
                **{f"y matches the tanh form with the cubic coefficient {c:g}, not 0.044715: check the "
                   "constants": _tanh_form(u, c) for c in DECIMAL_SLIPS}}
    return {"y matches the tanh form of gelu, where approximate='none' asks for the erf form: check how the "
            "form is chosen": F.gelu(u, approximate="tanh")}


def _derivative(u, approximate):
    """gelu'(u) by float64 autograd, as the reference's gradients are computed."""
    u = u.detach().requires_grad_()
    (grad,) = torch.autograd.grad(F.gelu(u, approximate=approximate).sum(), u)
    return grad


def _diagnose_dbias(got, inputs):
    """dbias as the sum of only the first or last rows' terms dy · gelu'(u): the other strips'
    partial sums not added in (course.hints.one_strip)."""
    cols = inputs["x"].shape[-1] if inputs["x"].dim() else 0
    if not cols or not inputs["x"].numel():
        return []
    u = (inputs["x"].double() + inputs["bias"].double()).reshape(-1, cols)
    terms = inputs["dy"].double().reshape(-1, cols) * _derivative(u, inputs["approximate"])
    return one_strip("dbias", got, terms, *_gradient_tolerance(inputs)["dbias"])


def _diagnose_dx(name, got, inputs):
    """The slip of gelu'(u) that a wrong dx follows, named (course.hints.followed_model); a
    dbias of one strip's rows."""
    if name == "dbias":
        return _diagnose_dbias(got, inputs)
    cols = got.shape[-1] if got.dim() else 0
    if name != "dx" or not cols or not got.numel():
        return []
    rows = max(1, DIAGNOSED // cols)
    x, dy, dx = (t.reshape(-1, cols)[:rows].double() for t in (inputs["x"], inputs["dy"], got))
    u = x + inputs["bias"].double()
    usable = dy.abs() >= DY_FLOOR * dy.abs().max()
    u, dy, dx = u[usable], dy[usable], dx[usable]
    atol, rtol = _gradient_tolerance(inputs)["dx"]
    approximate = inputs["approximate"]
    models = {"": _derivative(u, approximate), **(_tanh_slips(u) if approximate == "tanh" else _erf_slips(u))}
    slip = followed_model(dx / dy, (atol + rtol * dx.abs()) / dy.abs(), models)
    return [f"dx matches gelu'(u) = {slip}"] if slip else []


OPS = {
    "forward": Op(nan_filled(_forward), _forward_reference, ("y",), dtypes_like("x"), _forward_tolerance,
                  diagnose=model_reading(_forward_slips, _forward_reference, ("y",), _forward_tolerance)),
    "backward": Op(nan_filled(_backward), _gradients_reference, ("dx", "dbias"), dtypes_like("x", 2),
                   _gradient_tolerance, diagnose=_diagnose_dx),
    "autograd": Op(nan_filled(_autograd), _gradients_reference, ("dx", "dbias"), dtypes_like("x", 2),
                   _gradient_tolerance, diagnose=_diagnose_dx),
    "gradcheck": gradcheck_op(nan_filled(_gradcheck), GRADCHECK_INPUTS),
    "rerun": Op(nan_filled(_rerun), _rerun_reference, RERUN_OUTPUTS, dtypes_like("x", 4), _rerun_tolerance,
                diagnose=_diagnose_dx),
}


# What each op runs of the code students write ("file, function", as its TODO line names it), by
# path: a public test runs as soon as its op's are written (course/todos.py). The compiled ops
# refuse to run on the GPU while their own kernels are unwritten (bias_gelu.cpp).
# The derivative (gelu_math.h) runs in the CPU loops and the kernels alike; the forward does not.
GELU_GRADS = ("gelu_math.h, gelu_erf_grad", "gelu_math.h, gelu_tanh_grad")
FORWARD_KERNELS = ("bias_gelu_forward.cu, bias_gelu_forward_kernel",)
BACKWARD_KERNELS = ("bias_gelu_backward.cu, bias_gelu_backward_kernel", "bias_gelu_backward.cu, sum_strips_kernel")
COMPILED_BACKWARD = {"cpu": GELU_GRADS, "cuda": GELU_GRADS + BACKWARD_KERNELS}
FUNCTION = ("bias_gelu.py, BiasGeluFunction.forward", "bias_gelu.py, BiasGeluFunction.backward")
THROUGH_AUTOGRAD = {"cpu": GELU_GRADS + FUNCTION, "cuda": GELU_GRADS + FUNCTION + FORWARD_KERNELS + BACKWARD_KERNELS}
FUNCTIONS_RUN = {
    "forward": {"cuda": FORWARD_KERNELS},
    "backward": COMPILED_BACKWARD,
    "rerun": COMPILED_BACKWARD,
    "autograd": THROUGH_AUTOGRAD,
    "gradcheck": THROUGH_AUTOGRAD,
}


# ---- the cases ----

HINTS = {
    "forward": "y = gelu<kForm>(x + bias) in acc_t for every element: does each thread load its bias vector "
               "once and walk its rows (row += row_step)?",
    "backward": "dx = dy * gelu_grad<kForm>(x + bias); dbias = dx summed over every row: does stage 1 take every "
                "row of its strip and write every column of its block, and stage 2 add every strip?",
    "autograd": "BiasGeluFunction.backward must return (dx, dbias, None): one gradient per input of forward",
    "gradcheck": "torch.autograd.gradcheck(bias_gelu, (x, bias)) on small float64 inputs with requires_grad=True "
                 "prints the numerical and your analytical Jacobians",
    "tail": "N is not a multiple of the vector width here: whole_vectors sends such rows to the scalar path "
            "(kVec = 1); does your kernel index by vecs, never by cols?",
    "misaligned": "a tensor starts one element past a 16-byte boundary here: a 16-byte load there is a "
                  "'misaligned address' error. whole_vectors must check every pointer",
    "extreme": "|x + bias| is 20, 1e4 or 65504 here: gelu must give exactly x + bias or 0, never NaN (erf and "
               "tanh saturate to +-1; a tanh built from exp overflows)",
    "rerun": "two runs on the same inputs gave different bits: atomicAdd adds in whatever order the blocks "
             "finish; write each strip's partials and add them in a fixed order instead",
    "stream": "launch on c10::cuda::getCurrentCUDAStream(), not the default stream (<<<grid, block, 0, stream>>>)",
    "checks": "check every argument with TORCH_CHECK and name it in the message",
}
SHORT = {torch.float32: "fp32", torch.float16: "fp16", torch.bfloat16: "bf16", torch.float64: "fp64"}
FORMS = {"erf": "none", "tanh": "tanh"}


def _case(device, op, form, dtype, shape, what="", points=1.0, checks=(INPUTS_UNCHANGED,), hint="", **params):
    """A values case named {device}_{op}_{form}_{dtype}[_{what}], in group {device}_{op}."""
    name = "_".join(filter(None, (device, op, form, SHORT[dtype], what)))
    return Case(name, f"{device}_{op}", device, points,
                dict(op=op, approximate=FORMS[form], dtype=dtype, shape=shape, **params),
                checks=checks, hint=hint or HINTS[op])


def _forward_case(device, form, dtype, shape, what="", **params):
    return _case(device, "forward", form, dtype, shape, what, **params)


def _backward_case(device, form, dtype, shape, what="", **params):
    return _case(device, "backward", form, dtype, shape, what, **params)


def _autograd_case(device, form, dtype, shape, what="", **params):
    return _case(device, "autograd", form, dtype, shape, what, **params)


def _gradcheck_case(device, form, shape):
    return _case(device, "gradcheck", form, torch.float64, shape, checks=())


# Each op's arguments, x first: an error message names its own and no other but x.
ARGUMENTS = {"forward": ("x", "bias", "approximate"), "backward": ("x", "dy", "bias", "approximate")}


def _error(name, words, op="forward", device="cpu", **bad):
    return error_case(name, words, HINTS["checks"], ARGUMENTS[op], device, op=op, bad=bad)


# A perf case is timed once every case of the student kernels it runs has passed: every such
# case in the suite that runs it (the notebook's holds the public ones, the autograder's all).
NEEDS = {"forward": ("cuda_forward_*",), "backward": ("cuda_backward_*", "cuda_rerun_*")}


def _perf(op, dtype, shape, points=2.0, **params):
    """Time the compiled op against the reference's (and eager PyTorch: F.gelu(x + bias), or its
    backward through autograd, for the report)."""
    return Case(f"cuda_perf_{op}_{SHORT[dtype]}", f"cuda_perf_{op}", "cuda", points,
                dict(op=op, approximate="none", dtype=dtype, shape=shape, full_at=FULL_AT, zero_at=PERF_ZERO_AT,
                     **params),
                kind="perf", timeout=120.0, needs=NEEDS[op],
                hint="are your loads and stores 16 bytes wide, and does each thread load its bias once?")


# No points at 0.55x the reference's speed, from the bytes: eager's forward moves 4 tensors the
# size of x (read x, write x + bias, read it, write y) where a fused one moves 2, its backward 4
# where a fused one moves 3. A kernel that does not fuse lands near eager's speed, about half
# the reference's forward and three quarters of its backward.
PERF_ZERO_AT = 0.55
PERF_SHAPE = (8192, 4096)  # 128 MB of fp32 per tensor: well above any L2, and 0.1 ms or more

CASES = [
    _forward_case("cpu", "erf", torch.float32, (64, 256)),
    _forward_case("cpu", "tanh", torch.float32, (33, 1001), "tail"),
    _backward_case("cpu", "erf", torch.float32, (300, 256)),
    _autograd_case("cpu", "tanh", torch.float32, (40, 96)),
    _gradcheck_case("cpu", "tanh", (3, 20)),
    _forward_case("cuda", "erf", torch.float32, (256, 1024)),
    _forward_case("cuda", "tanh", torch.float32, (77, 1001), "tail", hint=HINTS["tail"]),
    _backward_case("cuda", "erf", torch.float32, (512, 768)),
    _autograd_case("cuda", "tanh", torch.float32, (100, 768)),
    _error("cpu_error_bias_shape", ("bias",), bias=lambda b: b[:-1]),
    # reference_vs_torch: the notebook's estimate (course/cases.py), from docs/performance.md
    _perf("forward", torch.float32, PERF_SHAPE, reference_vs_torch=2.18),
]

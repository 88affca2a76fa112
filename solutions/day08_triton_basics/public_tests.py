"""day08 Triton basics: what is correct, what is fast, and the cases.

vector_add(x, y) -> x + y                       vector_add.py
softmax(x) -> torch.softmax(x, dim=-1)          softmax.py

Both run on the GPU only (Triton compiles for it), so every case is a CUDA case. A case's
inputs name what it runs ("op"): add or softmax; perf cases time them against torch's
x + y and torch.softmax on the same inputs.
"""
import math

import torch

from course.cases import FULL_AT, INPUTS_UNCHANGED, ZERO_AT, Case, standard_normal
from course.harness import nan_filled
from course.ops import Op, dtypes_like

from ..common.error_cases import error_case, spoil

UNIT = "day08_triton_basics"
# Where a softmax is NaN (a row of -inf only), the op's output and the reference both show
# this instead, so that the comparison sees whether the NaN is where torch puts it.
NAN_MARK = -1.0  # no softmax is negative
SHORT = {torch.float32: "fp32", torch.float16: "fp16", torch.bfloat16: "bf16"}


# ---- inputs ----

def make_inputs(case, generator):
    p = case.params
    dtype, shape = p.get("dtype", torch.float32), p["shape"]
    x = standard_normal(shape, generator, dtype) * p.get("scale", 1.0)
    if p.get("neg_inf"):  # about a tenth of the entries, and the first row entirely when asked
        x = torch.where(torch.rand(shape, generator=generator) < 0.1, -math.inf, x)
    if p.get("neg_inf_row") and x.numel():
        x.reshape(-1, shape[-1])[0] = -math.inf
    inputs = {"op": p["op"], "x": x.to(dtype), "nan_rows": bool(p.get("neg_inf_row"))}
    if p["op"] == "add":
        inputs["y"] = standard_normal(shape, generator, dtype).to(dtype)
    return inputs


def on_device(case, inputs):
    """Layouts and spoiled arguments are made here, where the op will see them."""
    if case.params.get("transposed"):
        inputs["x"] = inputs["x"].t().contiguous().t()  # the same values, columns apart in memory
    spoil(case, inputs)
    return inputs


# ---- the calls: `ext` is triton_basics.py ----

def _add(ext, inputs):
    return ext.vector_add(inputs["x"], inputs["y"])


def _softmax(ext, inputs):
    y = ext.softmax(inputs["x"])
    # Only where a NaN is right: another pass over y would be timed too.
    return torch.nan_to_num(y, nan=NAN_MARK, posinf=math.inf, neginf=-math.inf) if inputs.get("nan_rows") else y


def baseline(inputs):
    """torch's own op on the same inputs: what a perf case is measured against."""
    if inputs["op"] == "add":
        return inputs["x"] + inputs["y"]
    return torch.softmax(inputs["x"], dim=-1)


def bytes_moved(inputs):
    """The least either op moves: add reads x and y and writes out; softmax reads x, writes y."""
    x = inputs["x"]
    return x.element_size() * x.numel() * (3 if inputs["op"] == "add" else 2)


# ---- what is right: float64 on the inputs as given ----

def _add_reference(inputs):
    return (inputs["x"].double() + inputs["y"].double(),)


def _softmax_reference(inputs):
    y = torch.softmax(inputs["x"].double(), dim=-1)
    return (torch.nan_to_num(y, nan=NAN_MARK) if inputs["nan_rows"] else y,)


# How far from it an answer may be. add: x + y rounded once to the dtype, half an ulp. softmax,
# computed in float32 and rounded once: exp(x - m) is off by float32's eps times |x - m| (the
# rounding of its argument) and a few roundings of its own, relative, and |x - m| is at most
# about 104 where exp is still above float32's smallest subnormal; the sum of D such terms
# by a tree of log2(D) roundings; then the output's half ulp. Absolute: the dtype's smallest
# subnormal, and float32's below 2^-126, where y underflows.
EPS32 = torch.finfo(torch.float32).eps


def _add_tolerance(inputs):
    return 0.0, torch.finfo(inputs["x"].dtype).eps / 2


def _smallest_subnormal(dtype):
    info = torch.finfo(dtype)
    return info.smallest_normal * info.eps


def _softmax_tolerance(inputs):
    x = inputs["x"]
    cols = max(x.shape[-1], 2) if x.dim() else 2
    relative = (104 + 8 + math.log2(cols)) * EPS32 + torch.finfo(x.dtype).eps / 2
    return max(_smallest_subnormal(x.dtype), 2.0 ** -126), relative


# ---- what a wrong output says ----

EXP_LIMIT = math.log(torch.finfo(torch.float32).max)  # exp of anything larger overflows float32: 88.72


def _programs_overlap(name, got, inputs):
    """Only the first K elements written, in memory order, the rest NaN: the programs cover K
    elements, not n. Where K is the programs' count - 1 plus a power of two, their blocks overlap."""
    flat = got.reshape(-1)
    n = flat.numel()
    unwritten = torch.isnan(flat.double())
    if n < 2 or not unwritten.any():
        return []
    written = int(unwritten.double().argmax())  # the first NaN
    if written == 0 or not unwritten[written:].all():
        return []
    sizes = [1 << k for k in range(4, 18) if -(-n // (1 << k)) - 1 + (1 << k) == written]
    cover = (f": {written} is {-(-n // sizes[0])} programs - 1 + a block of {sizes[0]}, what blocks of {sizes[0]} "
             "that overlap cover" if sizes else "")
    return [f"only the first {written} of the {n} elements were written, the rest are NaN{cover}; check where each "
            "program's block starts and how many programs there are"]


def _rows_of(t, inputs):
    cols = inputs["x"].shape[-1]
    return t.double().reshape(-1, cols)


def _close(got, model, atol, rtol):
    """Where got is within the tolerance of model (NaN is not)."""
    return (got - model).abs() <= atol + rtol * model.abs()


def _sum_leaked(got, expected, atol, rtol):
    """[a line] where most wrong rows are the right row times a factor below 1 of their own: the
    row's sum of exponentials is larger than its own, so values from outside the row are in it."""
    wrong = ~_close(got, expected, atol, rtol).all(dim=1)
    usable = (expected > 0) & (got > 0) & (expected != NAN_MARK)
    factor = torch.where(usable, got / expected.where(usable, 1.0), float("nan")).nanmedian(dim=1).values
    scaled = wrong & (factor < 1 - rtol) & _close(got, factor[:, None] * expected, atol, rtol).all(dim=1)
    count, of = int(scaled.sum()), int(wrong.sum())
    if count < max(2, of / 2):
        return []
    return [f"{count} of the {of} wrong rows are the right row times a factor below 1 of their own "
            f"({factor[scaled].min():.3g} to {factor[scaled].max():.3g}): each such row's sum is larger than its "
            "own, as if values from outside the row were added in; check what the lanes past the row's end load"]


def _overflowed(got, expected, x, atol, rtol):
    """[a line] where every wrong row is NaN at its entries whose exp overflows float32 and 0
    elsewhere: exp(x) is inf there, and so is the row's sum."""
    wrong = ~_close(got, expected, atol, rtol).all(dim=1)
    over = x[wrong] > EXP_LIMIT
    if not wrong.any() or not torch.equal(torch.isnan(got[wrong]), over) or (got[wrong][~over].abs() > atol).any():
        return []
    return [f"every wrong row ({int(wrong.sum())} of {got.shape[0]}) is NaN at its entries above {EXP_LIMIT:.4g} and "
            "0 elsewhere: exp of those entries overflows float32, and so does the row's sum; check what exp is taken "
            "of"]


def _read_softmax(name, got, inputs):
    if not got.numel():
        return []
    expected, x = _rows_of(_softmax_reference(inputs)[0], inputs), _rows_of(inputs["x"], inputs)
    atol, rtol = _softmax_tolerance(inputs)
    got = _rows_of(got, inputs)
    return _sum_leaked(got, expected, atol, rtol) or _overflowed(got, expected, x, atol, rtol)


OPS = {
    "add": Op(nan_filled(_add), _add_reference, ("out",), dtypes_like("x"), _add_tolerance,
              diagnose=_programs_overlap),
    "softmax": Op(nan_filled(_softmax), _softmax_reference, ("y",), dtypes_like("x"), _softmax_tolerance,
                  diagnose=_read_softmax),
}


# ---- the cases ----

HINTS = {
    "add": "offsets = pid * BLOCK_SIZE + tl.arange(0, BLOCK_SIZE), masked with offsets < n on the load and the "
           "store; the grid has triton.cdiv(n, BLOCK_SIZE) programs",
    "softmax": "one program per row; load with mask=offsets < cols and other=-inf, in float32; subtract the row's "
               "max before exp, then divide by the sum",
    "tail": "D is not a power of two here: lanes past the row's end must read -inf (other=-float('inf')), or the "
            "next row leaks into this one's max and sum",
    "long": "the row is longer than one program holds: softmax_long_rows_kernel, a running max per lane and a sum "
            "rescaled by exp(m_old - m_new) whenever the max grows",
    "neg_inf": "-inf entries give exp(-inf) = 0; a row of -inf only has a NaN softmax in torch, and must here too",
    "huge": "entries of up to several hundred: exp overflows float32 unless the row's max is subtracted first",
    "checks": "check the arguments in the Python wrapper and name them in the message",
}


def _case(op, dtype, shape, what="", points=1.0, hint="", checks=(INPUTS_UNCHANGED,), **params):
    """A values case named cuda_{op}_{dtype}[_{what}], in group cuda_{op}. Declared bf16, it runs
    in fp16 where Triton cannot compile bf16 for the GPU (course/dtypes.py)."""
    name = "_".join(filter(None, ("cuda", op, SHORT[dtype], what)))
    return Case(name, f"cuda_{op}", "cuda", points, dict(op=op, dtype=dtype, shape=shape, **params),
                checks=checks, hint=hint or HINTS[op], triton=True)


# Each op's arguments, x first: an error message names its own and no other but x.
ARGUMENTS = {"add": ("x", "y"), "softmax": ("x",)}


def _error(name, words, op="add", **bad):
    return error_case(name, words, HINTS["checks"], ARGUMENTS[op], "cuda", op=op, bad=bad)


NEEDS = {"add": ("cuda_add_*",), "softmax": ("cuda_softmax_*",)}
ADD_PERF_SHAPE = (1 << 26,)          # 256 MB of fp32 per tensor
SOFTMAX_PERF_SHAPE = (16384, 4096)   # 256 MB of fp32


def _perf(op, dtype, shape, points=2.0, **params):
    return Case(f"cuda_perf_{op}_{SHORT[dtype]}", f"cuda_perf_{op}", "cuda", points,
                dict(op=op, dtype=dtype, shape=shape, full_at=FULL_AT, zero_at=ZERO_AT, **params), kind="perf",
                timeout=120.0, needs=NEEDS[op], triton=True,
                hint="is BLOCK_SIZE large enough (1024 or more) and the row held in one program where it fits?")


CASES = [
    _case("add", torch.float32, (1000,), "tail"),
    _case("add", torch.float16, ((1 << 20) + 3,)),
    _case("softmax", torch.float32, (64, 1024)),
    _case("softmax", torch.float32, (50, 1000), "tail", hint=HINTS["tail"]),
    _case("softmax", torch.float16, (33, 4096)),
    _case("softmax", torch.float32, (4, 20000), "long_rows", hint=HINTS["long"]),
    _case("softmax", torch.float32, (16, 300), "neg_inf", neg_inf=True, neg_inf_row=True, hint=HINTS["neg_inf"]),
    _case("softmax", torch.float32, (8, 1000), "huge", scale=300.0, hint=HINTS["huge"]),
    _error("cuda_error_add_shape", ("y", "shape"), y=lambda y: y[:, :-1]),
    _error("cuda_error_softmax_on_cpu", ("x", "CUDA"), op="softmax", x=lambda x: x.cpu()),
    # reference_vs_torch: the notebook's estimate (course/cases.py), from docs/performance.md
    _perf("add", torch.float32, ADD_PERF_SHAPE, reference_vs_torch=1.0),
    _perf("softmax", torch.float32, SOFTMAX_PERF_SHAPE, reference_vs_torch=1.27),
]

"""day05 LayerNorm at the bandwidth limit: what is correct, what is fast, and the cases.

forward(x [..., D], gamma [D], beta [D], eps, kernel) -> (y, mean [...], rstd [...])   compiled
backward(dy, x, gamma, mean, rstd, kernel) -> (dx, dgamma, dbeta)                     compiled
layer_norm(x, D, gamma, beta, eps, kernel), forward_bytes(rows, cols, dtype),
backward_bytes(rows, cols, dtype)                                                     layernorm.py

A case's inputs name what it runs ("op"):
- forward: the compiled forward with the case's kernel; y, mean and rstd against float64;
- backward_op: the compiled backward with the case's kernel, on the statistics the parent
  computed; dx on those statistics, dgamma and dbeta as sums over the rows;
- autograd: the gradients of layer_norm through autograd against float64 F.layer_norm's;
- forward_bytes, backward_bytes: the roofline's byte counts, exact integers;
- perf cases time `forward` with the student's own fastest version ("vectorized") against
  F.layer_norm on the same inputs, once everything they need passes.
Every compiled op runs under torch.use_deterministic_algorithms(True), which makes at::empty
hand out memory filled with NaN: an output element that is never written shows up as NaN.
"""
import torch
import torch.nn.functional as F

from course.cases import FULL_AT, INPUTS_UNCHANGED, POISON, ROTATED, ZERO_AT, Case
from course.harness import nan_filled
from course.hints import model_reading
from course.ops import Op, dtypes_like, exact, gradients

from ..common.error_cases import error_case
from ..common.layernorm_tests import (CHECK_HINT, EPS, FORWARD_OUTPUTS, GRADIENTS, STATS_DTYPE, autograd_gradients64,
                                      backward_tolerance, condition_by_rstd, forward_dtypes, forward_tolerance,
                                      formula_gradients, layer_norm64, random_affine, random_dy, random_x,
                                      saved_statistics, values_case)
from ..common.layouts import misaligned

UNIT = "day05_layernorm_performance"


def make_inputs(case, generator):
    p = case.params
    op, dtype = p["op"], p.get("dtype", torch.float32)
    if op.endswith("_bytes"):
        return {"op": op, "rows": p["shape"][0], "cols": p["shape"][1], "dtype": dtype}
    x = random_x(p, generator, dtype)
    gamma, beta = random_affine(p["shape"][-1], generator, dtype)
    inputs = {"op": op, "kernel": p.get("kernel", "auto"), "eps": EPS, "x": x.to(dtype), "gamma": gamma.to(dtype),
              "beta": beta.to(dtype), "misaligned": p.get("misaligned", False)}
    if op in ("backward_op", "autograd"):
        inputs["dy"] = random_dy(p["shape"], generator, dtype)
    if op == "backward_op":
        inputs["mean"], inputs["rstd"] = saved_statistics(inputs["x"])
    if "bad" in p:
        inputs["bad"] = p["bad"]
    return inputs


BAD = {"x_on_cpu": lambda inputs: inputs.update(x=inputs["x"].cpu()),
       "unknown_kernel": lambda inputs: inputs.update(kernel="fastest")}


def on_device(case, inputs):
    """Misaligned tensors and spoiled arguments are made here, where the op will see them."""
    if inputs.get("misaligned"):
        for name in ("x", "dy"):
            if name in inputs:
                inputs[name] = misaligned(inputs[name])
    if "bad" in inputs:
        BAD[inputs.pop("bad")](inputs)
    return inputs


# ---- the calls: `ext` is the unit's entry module, layernorm.py; ext._ext is the compiled extension ----

def _call_forward(ext, inputs):
    return ext._ext.forward(inputs["x"], inputs["gamma"], inputs["beta"], inputs["eps"], inputs["kernel"])


def _call_backward(ext, inputs):
    return ext._ext.backward(inputs["dy"], inputs["x"], inputs["gamma"], inputs["mean"], inputs["rstd"],
                             inputs["kernel"])


def _call_autograd(ext, inputs):
    def layer_norm(x, gamma, beta):
        return ext.layer_norm(x, x.shape[-1], gamma, beta, inputs["eps"], kernel=inputs["kernel"])
    return gradients(layer_norm, inputs, ("x", "gamma", "beta"), "dy")


def _call_bytes(ext, inputs):
    count = getattr(ext, inputs["op"])  # layernorm.py's forward_bytes or backward_bytes
    return torch.tensor([count(inputs["rows"], inputs["cols"], inputs["dtype"])], dtype=torch.float64)


def baseline(inputs):
    """PyTorch's own op on the same inputs: what a perf case is measured against."""
    return F.layer_norm(inputs["x"], (inputs["x"].shape[-1],), inputs["gamma"], inputs["beta"], inputs["eps"])


def _element_bytes(dtype):
    return torch.finfo(dtype).bits // 8


def _bytes(op, rows, cols, dtype):
    stats = _element_bytes(STATS_DTYPE[dtype])
    tensors = 2 if op == "forward_bytes" else 3  # x, y / dy, x, dx; and as many vectors of D
    return _element_bytes(dtype) * (tensors * rows * cols + tensors * cols) + stats * 2 * rows


def bytes_moved(inputs):
    x = inputs["x"]
    return _bytes("forward_bytes", x.numel() // x.shape[-1], x.shape[-1], x.dtype)


# ---- what is right: float64 on the inputs as given (fp16 and bf16 ones already rounded) ----

def _forward_reference(inputs):
    return layer_norm64(inputs["x"].double(), inputs["gamma"].double(), inputs["beta"].double())


def _backward_reference(inputs):
    """dx on the statistics given, dgamma and dbeta as sums over the rows."""
    return formula_gradients(*(inputs[name].double() for name in ("dy", "x", "gamma", "mean", "rstd")))


def _autograd_reference(inputs):
    return autograd_gradients64(inputs["x"], inputs["gamma"], inputs["beta"], inputs["dy"])


def _bytes_reference(inputs):
    return (torch.tensor([_bytes(inputs["op"], inputs["rows"], inputs["cols"], inputs["dtype"])], dtype=torch.float64),)


def _bytes_slips(name, inputs):
    """The count as the usual slips make it: a tensor or the statistics left out, elements
    counted for bytes, the statistics counted in x's dtype."""
    rows, cols, dtype = inputs["rows"], inputs["cols"], inputs["dtype"]
    element, stats = _element_bytes(dtype), _element_bytes(STATS_DTYPE[dtype])
    right = _bytes(inputs["op"], rows, cols, dtype)
    tensors = 2 if inputs["op"] == "forward_bytes" else 3
    check = "check that every tensor the op reads or writes is counted, once"
    slips = {
        f"bytes is the count without the mean and rstd of each row: {check}": right - stats * 2 * rows,
        f"bytes is the count of {tensors - 1} tensors of rows × D, not {tensors}: {check}": right - element * rows * cols,
        "bytes is the count of elements, not of bytes: check the size each element takes":
            tensors * rows * cols + tensors * cols + 2 * rows,
        "bytes counts the mean and rstd in x's dtype: they are kept in float32 (float64 for float64 x)":
            right + (element - stats) * 2 * rows,
    }
    return {line: torch.tensor([count], dtype=torch.float64) for line, count in slips.items()}


# The tolerances: common/layernorm_tests.py's model (day04's), with a row's |mean| / std read
# from its rstd.

def _rows(inputs, name):
    return inputs[name].double().reshape(-1, inputs["x"].shape[-1])


def _forward_tolerance(inputs):
    return forward_tolerance(_rows(inputs, "x"), inputs["gamma"].double(), inputs["beta"].double(),
                             inputs["x"].dtype, condition_by_rstd)


def _backward_tolerance(inputs):
    return backward_tolerance(_rows(inputs, "x"), inputs["gamma"].double(), _rows(inputs, "dy"), inputs["x"].dtype,
                              condition_by_rstd)


_BYTES = Op(nan_filled(_call_bytes), _bytes_reference, ("bytes",), lambda inputs: (torch.float64,), exact,
            host_outputs=("bytes",), diagnose=model_reading(_bytes_slips, _bytes_reference, ("bytes",), exact))
OPS = {
    "forward": Op(nan_filled(_call_forward), _forward_reference, FORWARD_OUTPUTS, forward_dtypes(),
                  _forward_tolerance),
    "backward_op": Op(nan_filled(_call_backward), _backward_reference, GRADIENTS, dtypes_like("x", 3),
                      _backward_tolerance),
    "autograd": Op(nan_filled(_call_autograd), _autograd_reference, GRADIENTS, dtypes_like("x", 3),
                   _backward_tolerance),
    "forward_bytes": _BYTES,
    "backward_bytes": _BYTES,
}


# What each op runs of the code students write ("file, function", as its TODO line names it), by
# path and, for forward, kernel version: a public test runs as soon as its own are written
# (course/todos.py), so version 2's tests before version 3's. Version 3 hands rows that are not
# whole aligned vectors to version 2; version 4 ("auto", and autograd's forward) hands some shapes
# to version 3, which ones on the GPU's say for rows too long for one block, so it waits on both.
# Versions 1 and 4 themselves and both backwards are given. layernorm.cpp's forward refuses the same.
WARP = ("layernorm_forward_warp.cu, layernorm_forward_warp_kernel",)
VECTORIZED = ("layernorm_forward_vectorized.cu, layernorm_forward_vectorized_kernel",
              "layernorm_forward_vectorized.cu, launch_layernorm_forward_vectorized") + WARP
FUNCTIONS_RUN = {
    "forward warp_per_row": {"cuda": WARP},
    "forward vectorized": {"cuda": VECTORIZED},
    "forward registers": {"cuda": VECTORIZED},
    "forward auto": {"cuda": VECTORIZED},
    "autograd": {"cuda": VECTORIZED},
    "forward_bytes": {"cpu": ("layernorm.py, forward_bytes",)},
    "backward_bytes": {"cpu": ("layernorm.py, backward_bytes",)},
}


# ---- the cases ----

HINTS = {
    "warp_per_row": "version 2: each warp takes its row, then the rows its grid's warps do not reach (rows can "
                    "outnumber them); lanes stride by 32 up to j < cols; sums with warp_reduce_sum; one lane writes "
                    "mean and rstd",
    "vectorized": "version 3: lane v reads Vec x_row[v], x_row[v + 32], ... up to v < cols / kVec, and writes whole "
                  "Vecs of y; rows that are not whole aligned vectors go to version 2",
    "misaligned": "x starts one element past a 16-byte boundary: a 16-byte load there is a 'misaligned address' error. "
                  "Check is_aligned(x), gamma, beta and y and cols % kVec before launching, else use version 2",
    "fallback": "D is not a multiple of the vector length: version 3 must hand the row to version 2",
    "many_rows": "more rows than blocks in one launch: does each warp loop (row += row_step)?",
    "empty": "no rows: launch nothing (a grid of 0 blocks is an error)",
    "large_mean": "|mean| >> std: subtract the mean before squaring (two passes over the row)",
    "bytes": "count each tensor once: elements times torch.finfo(dtype).bits // 8, mean and rstd 4 bytes each "
             "(8 for float64)",
}


def _forward(kernel, what, shape, dtype=torch.float32, points=1.0, hint="", checks=(INPUTS_UNCHANGED,), **params):
    return values_case(f"cuda_{kernel}_{what}", "cuda", shape, dtype, points, checks, hint or HINTS.get(kernel, ""),
                       group=kernel, op="forward", kernel=kernel, **params)


def _backward(kernel, what, shape, dtype=torch.float32, **params):
    return values_case(f"cuda_bwd_{kernel}_{what}", "cuda", shape, dtype, checks=(), group="backward",
                       op="backward_op", kernel=kernel, **params)


def _bytes_case(op, shape, dtype):
    return values_case(f"cpu_{op}_{str(dtype)[6:]}", "cpu", shape, dtype, checks=(), hint=HINTS["bytes"],
                       group="bytes", op=op)


def _error(name, words, bad):
    return error_case(name, words, CHECK_HINT, ("x", "gamma", "beta", "eps", "kernel"), op="forward", bad=bad)


STUDENT_KERNELS = ("warp_per_row", "vectorized")
# A perf case is timed once every case of both student kernels passes: every such case in the
# suite that runs it (the notebook's holds the public ones, the autograder's all).
STUDENT_CASES = tuple(f"cuda_{kernel}_*" for kernel in STUDENT_KERNELS)


def _perf(what, shape, dtype, points=3.0, zero_at=ZERO_AT, **params):
    """Time version 3 against the reference's (F.layer_norm too, for the report)."""
    return Case(f"cuda_perf_{what}", "cuda_perf", "cuda", points,
                dict(op="forward", kernel="vectorized", shape=shape, dtype=dtype, full_at=FULL_AT, zero_at=zero_at,
                     **params),
                kind="perf", timeout=120.0, needs=STUDENT_CASES,
                hint="read the ncu report of your kernel: is memory throughput near the top, are loads 16 bytes wide?")


CASES = [
    _bytes_case("forward_bytes", (4096, 768), torch.float16),
    _bytes_case("backward_bytes", (1000, 7), torch.float32),
    _forward("warp_per_row", "fp32_d768", (256, 768), checks=(INPUTS_UNCHANGED, POISON)),
    _forward("warp_per_row", "fp16_d7", (300, 7), torch.float16),
    _forward("vectorized", "fp32_d1024", (256, 1024), checks=(INPUTS_UNCHANGED, POISON)),
    _forward("vectorized", "bf16_d4096", (64, 4096), torch.bfloat16),
    _forward("vectorized", "misaligned", (64, 768), misaligned=True, hint=HINTS["misaligned"]),
    _error("cpu_error_unknown_kernel", ("kernel",), "unknown_kernel"),
    # reference_vs_torch: the notebook's estimate (course/cases.py), from docs/performance.md
    _perf("fp32_d1024", (16384, 1024), torch.float32, reference_vs_torch=1.09),
]


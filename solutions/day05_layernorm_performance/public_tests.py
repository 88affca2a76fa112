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

from course.cases import INPUTS_UNCHANGED, POISON, ROTATED, Case
from course.harness import empty_is_nan

UNIT = "day05_layernorm_performance"
FORBIDDEN_OPS = ("aten::layer_norm", "aten::native_layer_norm", "aten::native_layer_norm_backward")
EPS = 1e-5
DY_MEAN = 0.5  # rows of dy do not average to 0, so that a dx without its mean(g) term is wrong everywhere
# Allowed error, as on day04: ROUNDINGS roundings of the accumulation type times the size of
# what is summed, plus OUTPUT_ROUNDINGS half-ulps of the output dtype, plus COND_ROUNDINGS
# times what float32 rounding of the mean does to x - mean in rows with |mean| >> std.
ROUNDINGS, OUTPUT_ROUNDINGS, COND_ROUNDINGS = 64, 2, 8
STATS_DTYPE = {torch.float16: torch.float32, torch.bfloat16: torch.float32, torch.float32: torch.float32,
               torch.float64: torch.float64}


def make_inputs(case, generator):
    p = case.params
    op, dtype = p["op"], p.get("dtype", torch.float32)
    if op.endswith("_bytes"):
        return {"op": op, "rows": p["shape"][0], "cols": p["shape"][1], "dtype": dtype}
    cols = p["shape"][-1]
    x = torch.randn(p["shape"], generator=generator, dtype=torch.float64) * p.get("std", 1.0) + p.get("mean", 0.0)
    inputs = {"op": op, "kernel": p.get("kernel", "auto"), "eps": EPS, "x": x.to(dtype),
              "gamma": (1 + 0.5 * torch.randn(cols, generator=generator, dtype=torch.float64)).to(dtype),
              "beta": (0.5 * torch.randn(cols, generator=generator, dtype=torch.float64)).to(dtype),
              "misaligned": p.get("misaligned", False)}
    if op in ("backward_op", "autograd"):
        inputs["dy"] = (torch.randn(p["shape"], generator=generator, dtype=torch.float64) + DY_MEAN).to(dtype)
    if op == "backward_op":
        mean, rstd = _statistics(inputs["x"].double())
        inputs["mean"], inputs["rstd"] = mean.to(STATS_DTYPE[dtype]), rstd.to(STATS_DTYPE[dtype])
    if "bad" in p:
        inputs["bad"] = p["bad"]
    return inputs


def _misaligned(t):
    """The same values, contiguous, starting one element past a 16-byte boundary."""
    flat = torch.empty(t.numel() + 1, dtype=t.dtype, device=t.device)
    flat[1:] = t.reshape(-1)
    return flat[1:].view(t.shape)


BAD = {"x_on_cpu": lambda inputs: inputs.update(x=inputs["x"].cpu()),
       "unknown_kernel": lambda inputs: inputs.update(kernel="fastest")}


def on_device(case, inputs):
    """Misaligned tensors and spoiled arguments are made here, where the op will see them."""
    if inputs.get("misaligned"):
        for name in ("x", "dy"):
            if name in inputs:
                inputs[name] = _misaligned(inputs[name])
    if "bad" in inputs:
        BAD[inputs.pop("bad")](inputs)
    return inputs


def _autograd(ext, inputs):
    x, gamma, beta = (inputs[name].detach().requires_grad_() for name in ("x", "gamma", "beta"))
    y = ext.layer_norm(x, x.shape[-1], gamma, beta, inputs["eps"], kernel=inputs["kernel"])
    return torch.autograd.grad(y, (x, gamma, beta), inputs["dy"])


RUNS = {
    "forward": lambda ext, i: ext._ext.forward(i["x"], i["gamma"], i["beta"], i["eps"], i["kernel"]),
    "backward_op": lambda ext, i: ext._ext.backward(i["dy"], i["x"], i["gamma"], i["mean"], i["rstd"], i["kernel"]),
    "autograd": _autograd,
    "forward_bytes": lambda ext, i: torch.tensor([ext.forward_bytes(i["rows"], i["cols"], i["dtype"])], dtype=torch.float64),
    "backward_bytes": lambda ext, i: torch.tensor([ext.backward_bytes(i["rows"], i["cols"], i["dtype"])], dtype=torch.float64),
}


def call(ext, inputs):
    """`ext` is the unit's entry module, layernorm.py; ext._ext is the compiled extension."""
    with empty_is_nan():
        return RUNS[inputs["op"]](ext, inputs)


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

def _statistics(x):
    mean = x.mean(dim=-1)
    return mean, 1 / torch.sqrt(((x - mean[..., None]) ** 2).mean(dim=-1) + EPS)


def reference(inputs):
    op = inputs["op"]
    if op.endswith("_bytes"):
        return (torch.tensor([_bytes(op, inputs["rows"], inputs["cols"], inputs["dtype"])], dtype=torch.float64),)
    x, gamma = inputs["x"].double(), inputs["gamma"].double()
    if op == "forward":
        mean, rstd = _statistics(x)
        return (x - mean[..., None]) * rstd[..., None] * gamma + inputs["beta"].double(), mean, rstd
    dy = inputs["dy"].double()
    if op == "autograd":
        leaves = [t.double().requires_grad_() for t in (inputs["x"], inputs["gamma"], inputs["beta"])]
        y = F.layer_norm(leaves[0], (x.shape[-1],), leaves[1], leaves[2], EPS)
        return torch.autograd.grad(y, leaves, dy)
    mean, rstd = inputs["mean"].double()[..., None], inputs["rstd"].double()[..., None]
    xhat = (x - mean) * rstd
    g = dy * gamma
    dx = rstd * (g - g.mean(dim=-1, keepdim=True) - xhat * (g * xhat).mean(dim=-1, keepdim=True))
    rows = x.reshape(-1, x.shape[-1]), dy.reshape(-1, x.shape[-1]), xhat.reshape(-1, x.shape[-1])
    return dx, (rows[1] * rows[2]).sum(0), rows[1].sum(0)


def output_names(inputs):
    op = inputs["op"]
    if op.endswith("_bytes"):
        return ("bytes",)
    return ("y", "mean", "rstd") if op == "forward" else ("dx", "dgamma", "dbeta")


def output_dtypes(inputs):
    if inputs["op"].endswith("_bytes"):
        return (torch.float64,)
    dtype = inputs["x"].dtype
    return tuple(STATS_DTYPE[dtype] if name in ("mean", "rstd") else dtype for name in output_names(inputs))


def _max(t):
    return t.abs().max().item() if t.numel() else 0.0


def tolerance(inputs):
    """{output name: (atol, rtol)}, from the sizes of what each output sums and rounds (day04's model)."""
    op = inputs["op"]
    if op.endswith("_bytes"):
        return {"bytes": (0.0, 0.0)}  # a count of bytes is exact
    dtype = inputs["x"].dtype
    acc_eps = torch.finfo(STATS_DTYPE[dtype]).eps
    rounding = ROUNDINGS * acc_eps + OUTPUT_ROUNDINGS * torch.finfo(dtype).eps / 2
    x = inputs["x"].double().reshape(-1, inputs["x"].shape[-1])
    gamma = inputs["gamma"].double()
    mean, rstd = _statistics(x)
    condition = (mean.abs() * rstd).max().item() if x.numel() else 0.0
    spread = acc_eps * condition  # float32 rounding of the mean, relative to the row's spread
    xhat = (x - mean[:, None]) * rstd[:, None]
    if op == "forward":
        atol = rounding * (_max(xhat * gamma) + _max(inputs["beta"].double())) + COND_ROUNDINGS * spread * _max(gamma)
        return {"y": (atol, torch.finfo(dtype).eps), "mean": (ROUNDINGS * acc_eps * _max(x), 0.0),
                "rstd": (0.0, ROUNDINGS * acc_eps + spread)}
    dy = inputs["dy"].double().reshape(x.shape)
    g = dy * gamma
    dx_size = _max(rstd * (g.abs().amax(dim=1) + xhat.abs().amax(dim=1) * (g * xhat).abs().mean(dim=1))) \
        if x.numel() else 0.0
    conditioned = rounding + COND_ROUNDINGS * spread
    return {"dx": (conditioned * dx_size, 0.0),
            "dgamma": (conditioned * _max((dy * xhat).abs().sum(dim=0)), 0.0),
            "dbeta": (rounding * _max(dy.abs().sum(dim=0)), 0.0)}


# ---- the cases ----

HINTS = {
    "warp_per_row": "version 2: warp w of block b takes rows b * 8 + w, then every gridDim.x * 8-th; lanes stride "
                    "by 32 up to j < cols; sums with warp_reduce_sum; lane 0 writes mean and rstd",
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
    return Case(f"cuda_{kernel}_{what}", f"cuda_{kernel}", "cuda", points,
                dict(op="forward", kernel=kernel, shape=shape, dtype=dtype, **params), checks=checks,
                hint=hint or HINTS.get(kernel, ""))


def _backward(kernel, what, shape, dtype=torch.float32, **params):
    return Case(f"cuda_bwd_{kernel}_{what}", "cuda_backward", "cuda", 1.0,
                dict(op="backward_op", kernel=kernel, shape=shape, dtype=dtype, **params))


def _bytes_case(op, shape, dtype):
    return Case(f"cpu_{op}_{str(dtype)[6:]}", "cpu_bytes", "cpu", 1.0, dict(op=op, shape=shape, dtype=dtype),
                hint=HINTS["bytes"])


def _error(name, words, bad):
    return Case(name, "cpu_errors", "cpu", 0.5, dict(op="forward", shape=(4, 64), bad=bad), kind="error",
                error_words=words, hint="check every argument with TORCH_CHECK and name it in the message")


STUDENT_KERNELS = ("warp_per_row", "vectorized")
# A perf case is timed once every case of both student kernels passes: every such case in the
# suite that runs it (the notebook's holds the public ones, the autograder's all).
STUDENT_CASES = tuple(f"cuda_{kernel}_*" for kernel in STUDENT_KERNELS)


def _perf(what, shape, dtype, points=3.0, full_at=1.0, zero_at=0.5):
    """Time version 3 against F.layer_norm."""
    return Case(f"cuda_perf_{what}", "cuda_perf", "cuda", points,
                dict(op="forward", kernel="vectorized", shape=shape, dtype=dtype, full_at=full_at, zero_at=zero_at),
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
    # Thresholds from the reference version 3 on an H100 (torch 2.11): 0.96x torch here.
    _perf("fp32_d1024", (16384, 1024), torch.float32, full_at=0.8, zero_at=0.4),
]


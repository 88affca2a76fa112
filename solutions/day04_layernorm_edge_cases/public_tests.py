"""day04 LayerNorm edge cases: what is correct, and the cases that check it.

forward(x [..., D], normalized_shape, gamma [D], beta [D], eps) -> (y [..., D], mean [...], rstd [...])
backward(dy [..., D], x, gamma, mean, rstd, output_mask) -> (dx [..., D], dgamma [D], dbeta [D])
layer_norm(x, normalized_shape, gamma, beta, eps) -> y, differentiable (layernorm.py)

A case's inputs name what it runs ("op"):
- forward: the compiled forward; y, mean and rstd against float64;
- backward: the gradients of layer_norm through autograd against float64 F.layer_norm's;
- no_affine: layer_norm(x, D) with gamma and beta left out, as F.layer_norm allows;
- backward_op: the compiled backward called directly (its error cases);
- overflow_forward, overflow_backward: a 4 GiB fp16 x of B * D > 2^31 elements, built on the
  GPU from a small tile; only its last rows (and dgamma, dbeta) come back to be judged. The
  backward one calls the compiled backward on statistics the parent computed, with dy = x.
Every op runs under torch.use_deterministic_algorithms(True), which makes at::empty hand out
memory filled with NaN: an output element that is never written shows up as NaN.

Each edge case is its own test, forward and backward, on the CPU and on the GPU; the CPU path
runs the kernels' algorithms, so a machine without a GPU checks everything but the kernels.
"""

import torch
import torch.nn.functional as F

from course.cases import INPUTS_UNCHANGED, OWN_KERNEL, Case
from course.harness import empty_is_nan

UNIT = "day04_layernorm_edge_cases"
FORBIDDEN_OPS = ("aten::layer_norm", "aten::native_layer_norm", "aten::native_layer_norm_backward",
                 "aten::group_norm", "aten::batch_norm", "aten::var_mean", "aten::var", "aten::std",
                 "aten::mean", "aten::sum")
EPS = 1e-5
DY_MEAN = 0.5  # rows of dy do not average to 0, so that a dx without its mean(g) term is wrong everywhere

# Allowed error. The kernels accumulate in float32 (float64 for float64) and round each output
# once to its dtype: allow ROUNDINGS roundings of the accumulation type times the size of what
# is summed (relative, for rstd), plus OUTPUT_ROUNDINGS half-ulps of the output dtype (fp16 and
# bf16 results are rounded to 11 and 8 bits). Right answers land 10 times inside; a sum run in
# fp16 or bf16 misses mean and rstd by 4 to 700 times the allowance, a lost element or a wrong
# row by far more. 64 also lets E[x^2] - E[x]^2 pass ordinary rows for sure: a row of 7 values
# has |mean| / std of 5 now and then, where that formula is off by some 25 roundings.
ROUNDINGS = 64
OUTPUT_ROUNDINGS = 2
# Rows with |mean| >> std are ill-conditioned ("condition" = max |mean| / std). float32 rounds
# their mean by ~eps * |mean|, which every x - mean carries, relative to std: eps * condition.
# At mean 1e4 and std 1e-2 that is ~0.1 of the row's spread, for any algorithm that keeps its
# mean in float32 (PyTorch's included), so y and the gradients get COND_ROUNDINGS times that
# (for y at mean 1e4: about 2.8, where a stable fp32 LayerNorm is off by up to 0.4) and rstd,
# which sees it squared, one. E[x^2] - E[x]^2 is off by ~eps * condition^2 instead: 1e5 times
# the variance itself, and half the rows come out negative, NaN; it fails.
COND_ROUNDINGS = 8

STATS_DTYPE = {torch.float16: torch.float32, torch.bfloat16: torch.float32, torch.float32: torch.float32,
               torch.float64: torch.float64}

# Same values, other strides, made on the device (a copy to the device would not keep them).
LAYOUTS = {
    # column-major storage: walked as rows, it yields the values of other rows
    "transposed": lambda t: t.transpose(-1, -2).contiguous().transpose(-1, -2),
    # every other element of a tensor twice as long: walked as rows, it yields the NaN gaps
    "every_other": lambda t: torch.stack([t, torch.full_like(t, float("nan"))], dim=-1)[..., 0],
}

# The 32-bit overflow case: 32769 rows of 65536 fp16 = 4 GiB, and row 32768 starts at element
# 2^31. The parent sends a small tile; the GPU repeats it with a per-row offset (so that a read
# from any other row shows), and only the last rows come back.
OVERFLOW_ROWS, OVERFLOW_COLS, TILE_ROWS, LAST_ROWS = 32769, 65536, 37, 3


def _row_offsets(rows, device="cpu"):
    """Row r of the overflow case is tile row r % TILE_ROWS plus (r % 13) / 64: multiples of
    1/64 below 1.25, exact in fp16, so the GPU's tensor and the parent's rows agree bit for bit."""
    return (torch.arange(rows, device=device) % 13).double() / 64


def make_inputs(case, generator):
    p = case.params
    op, dtype = p["op"], p.get("dtype", torch.float32)
    gamma_beta_cols = OVERFLOW_COLS if op.startswith("overflow") else p["shape"][-1]
    gamma = (1 + 0.5 * torch.randn(gamma_beta_cols, generator=generator, dtype=torch.float64)).to(dtype)
    beta = (0.5 * torch.randn(gamma_beta_cols, generator=generator, dtype=torch.float64)).to(dtype)
    inputs = {"op": op, "gamma": gamma, "beta": beta, "normalized_shape": gamma_beta_cols, "eps": EPS}
    if op.startswith("overflow"):
        # multiples of 1/64 in [-1, 1): exact in fp16 with any row offset added, and small enough
        # that dgamma, a sum over 32769 rows (dy = x), stays well below fp16's largest, 65504
        tile = torch.randint(-64, 64, (TILE_ROWS, OVERFLOW_COLS), generator=generator) / 64
        inputs.update(tile=tile.to(torch.float16), rows=OVERFLOW_ROWS)
        if op == "overflow_backward":  # the statistics forward would save, so that backward alone is judged
            owner = torch.arange(OVERFLOW_ROWS) % TILE_ROWS
            tile_mean, tile_rstd = _statistics(tile.double())
            inputs["mean"] = (tile_mean[owner] + _row_offsets(OVERFLOW_ROWS)).float()
            inputs["rstd"] = tile_rstd[owner].float()
        return inputs
    x = torch.randn(p["shape"], generator=generator, dtype=torch.float64) * p.get("std", 1.0) + p.get("mean", 0.0)
    if "quantum" in p:  # x on a grid of 1/64: its squares are exact in float32 (see the d1 case)
        x = torch.round(x / p["quantum"]) * p["quantum"]
    inputs["x"] = x.to(dtype)
    if op == "no_affine":
        del inputs["gamma"], inputs["beta"]
    if op in ("backward", "backward_op"):
        inputs["dy"] = (torch.randn(p["shape"], generator=generator, dtype=torch.float64) + DY_MEAN).to(dtype)
    if op == "backward_op":
        mean, rstd = _statistics(inputs["x"].double())
        inputs["mean"], inputs["rstd"] = mean.to(STATS_DTYPE[dtype]), rstd.to(STATS_DTYPE[dtype])
    return inputs


def on_device(case, inputs):
    """The overflow case's 4 GiB tensor, strided layouts and spoiled arguments are made here,
    on the device, where the op will see them."""
    p = case.params
    if p["op"].startswith("overflow"):
        tile, rows = inputs["tile"], inputs["rows"]
        x = tile.repeat(-(-rows // TILE_ROWS), 1)[:rows]  # row r holds tile row r % TILE_ROWS
        x += _row_offsets(rows, x.device)[:, None].to(x.dtype)  # in place: one 4 GiB tensor, not two
        inputs["x"] = x
    for name in p.get("strided", ()):
        inputs[name] = LAYOUTS[p["layout"]](inputs[name])
    for name, spoil in p.get("bad", {}).items():
        inputs[name] = spoil(inputs[name])
    return inputs


def _as_list(normalized_shape):
    return [normalized_shape] if isinstance(normalized_shape, int) else list(normalized_shape)


def _forward(ext, inputs):
    return ext._ext.forward(inputs["x"], _as_list(inputs["normalized_shape"]), inputs["gamma"], inputs["beta"],
                            inputs["eps"])


def _backward(ext, inputs):
    x, gamma, beta = (inputs[name].detach().requires_grad_() for name in ("x", "gamma", "beta"))  # same storage
    y = ext.layer_norm(x, inputs["normalized_shape"], gamma, beta, inputs["eps"])
    return torch.autograd.grad(y, (x, gamma, beta), inputs["dy"])


def _no_affine(ext, inputs):
    return (ext.layer_norm(inputs["x"], inputs["normalized_shape"], eps=inputs["eps"]),)


def _backward_op(ext, inputs):
    return ext._ext.backward(inputs["dy"], inputs["x"], inputs["gamma"], inputs["mean"], inputs["rstd"])


def _overflow_forward(ext, inputs):
    y, mean, rstd = _forward(ext, inputs)
    return y[-LAST_ROWS:].clone(), mean[-LAST_ROWS:].clone(), rstd[-LAST_ROWS:].clone()


def _overflow_backward(ext, inputs):
    x = inputs["x"]
    dx, dgamma, dbeta = ext._ext.backward(x, x, inputs["gamma"], inputs["mean"], inputs["rstd"])  # dy = x:
    return dx[-LAST_ROWS:].clone(), dgamma, dbeta  # no second 4 GiB tensor


RUNS = {"forward": _forward, "backward": _backward, "no_affine": _no_affine, "backward_op": _backward_op,
        "overflow_forward": _overflow_forward, "overflow_backward": _overflow_backward}


def call(ext, inputs):
    """`ext` is the unit's entry module, layernorm.py; ext._ext is the compiled extension."""
    with empty_is_nan():
        return RUNS[inputs["op"]](ext, inputs)


# ---- what is right: float64 on the inputs as given (fp16 and bf16 ones already rounded) ----

def _statistics(x):
    mean = x.mean(dim=-1)
    return mean, 1 / torch.sqrt(((x - mean[..., None]) ** 2).mean(dim=-1) + EPS)


def _layer_norm64(x, gamma, beta):
    mean, rstd = _statistics(x)
    return (x - mean[..., None]) * rstd[..., None] * gamma + beta, mean, rstd


def _gradients64(x, gamma, beta, dy):
    """PyTorch's own float64 LayerNorm and autograd: a derivation independent of the kernels'."""
    x, gamma, beta = (t.double().requires_grad_() for t in (x, gamma, beta))
    y = F.layer_norm(x, (x.shape[-1],), gamma, beta, EPS)
    return torch.autograd.grad(y, (x, gamma, beta), dy.double())


def _last_rows(inputs):
    """The overflow case's last rows in float64, rebuilt from the tile."""
    rows = torch.arange(inputs["rows"] - LAST_ROWS, inputs["rows"])
    return inputs["tile"].double()[rows % TILE_ROWS] + _row_offsets(inputs["rows"])[rows, None]


def _dx_formula(dy, x, gamma, mean, rstd):
    """dx on the mean and rstd given (day03's formula), where those are inputs, not results."""
    xhat = (x - mean[:, None]) * rstd[:, None]
    g = dy * gamma
    return rstd[:, None] * (g - g.mean(dim=1, keepdim=True) - xhat * (g * xhat).mean(dim=1, keepdim=True))


def _overflow_param_sums(inputs):
    """dgamma = Σ_r x_r · x̂_r and dbeta = Σ_r x_r over all rows (dy = x), and the sums of their
    terms' sizes, from the tile: row r differs from tile row t = r % TILE_ROWS by a constant, so
    x̂_r = x̂_t (up to the float32 rounding of the mean given, 1e-7 of x̂), and the rows of t add
    up to n_t · tile_t + (the sum of their offsets)."""
    tile = inputs["tile"].double()
    owner = torch.arange(inputs["rows"]) % TILE_ROWS
    count = torch.bincount(owner, minlength=TILE_ROWS).double()[:, None]
    offsets = torch.bincount(owner, weights=_row_offsets(inputs["rows"]), minlength=TILE_ROWS)[:, None]
    mean, rstd = _statistics(tile)
    xhat = (tile - mean[:, None]) * rstd[:, None]
    row_sums = count * tile + offsets
    size_sums = count * tile.abs() + offsets  # offsets >= 0: bounds Σ_r |x_r|
    return (xhat * row_sums).sum(0), row_sums.sum(0), (xhat.abs() * size_sums).sum(0), size_sums.sum(0)


def reference(inputs):
    op = inputs["op"]
    if op == "overflow_forward":
        return _layer_norm64(_last_rows(inputs), inputs["gamma"].double(), inputs["beta"].double())
    if op == "overflow_backward":
        x = _last_rows(inputs)
        mean, rstd = (inputs[name][-LAST_ROWS:].double() for name in ("mean", "rstd"))
        dx = _dx_formula(x, x, inputs["gamma"].double(), mean, rstd)
        dgamma, dbeta, _, _ = _overflow_param_sums(inputs)
        return dx, dgamma, dbeta
    x = inputs["x"].double()
    if op == "forward":
        return _layer_norm64(x, inputs["gamma"].double(), inputs["beta"].double())
    if op == "no_affine":
        return (_layer_norm64(x, 1.0, 0.0)[0],)
    return _gradients64(x, inputs["gamma"], inputs["beta"], inputs["dy"])


def output_names(inputs):
    return {"forward": ("y", "mean", "rstd"), "overflow_forward": ("y", "mean", "rstd"), "no_affine": ("y",),
            "backward": ("dx", "dgamma", "dbeta"), "backward_op": ("dx", "dgamma", "dbeta"),
            "overflow_backward": ("dx", "dgamma", "dbeta")}[inputs["op"]]


def _dtype(inputs):
    return inputs["tile"].dtype if "tile" in inputs else inputs["x"].dtype


def output_dtypes(inputs):
    dtype = _dtype(inputs)
    return tuple(STATS_DTYPE[dtype] if name in ("mean", "rstd") else dtype for name in output_names(inputs))


def _condition(x):
    """max over rows of |mean| / std: how far float32 rounding of the mean moves x - mean."""
    if x.numel() == 0 or x.shape[-1] == 1:
        return 0.0
    rows = x.reshape(-1, x.shape[-1])
    return (rows.mean(dim=1).abs() / rows.std(dim=1, unbiased=False).clamp_min(1e-300)).max().item()


def _max(t):
    return t.abs().max().item() if t.numel() else 0.0


def tolerance(inputs):
    """{output name: (atol, rtol)}, from the sizes of what each output sums and rounds."""
    op, dtype = inputs["op"], _dtype(inputs)
    acc_eps = torch.finfo(STATS_DTYPE[dtype]).eps
    rounding = ROUNDINGS * acc_eps + OUTPUT_ROUNDINGS * torch.finfo(dtype).eps / 2
    x = _last_rows(inputs) if op.startswith("overflow") else inputs["x"].double()
    x = x.reshape(-1, x.shape[-1])
    spread = acc_eps * _condition(x)  # the relative error float32 rounding of the mean leaves in x - mean
    ones = torch.ones(x.shape[-1], dtype=torch.float64)
    gamma = inputs["gamma"].double() if "gamma" in inputs else ones
    beta = inputs["beta"].double() if "beta" in inputs else 0 * ones
    mean, rstd = _statistics(x)
    xhat = (x - mean[:, None]) * rstd[:, None]
    # The float64 reference's own x̂ is off by ~eps64 * (|x| + |mean|) * rstd: where x̂ is 0
    # (D = 1) its dgamma comes out as 1e-13, not 0.
    reference_xhat_error = ROUNDINGS * torch.finfo(torch.float64).eps * (x.abs() + mean.abs()[:, None]) * rstd[:, None]
    if op in ("forward", "overflow_forward", "no_affine"):
        y_size = _max(xhat * gamma) + _max(beta)
        atol = rounding * y_size + (COND_ROUNDINGS * spread + _max(reference_xhat_error)) * _max(gamma)
        return {"y": (atol, torch.finfo(dtype).eps), "mean": (ROUNDINGS * acc_eps * _max(x), 0.0),
                "rstd": (0.0, ROUNDINGS * acc_eps + spread)}
    dy = x if op == "overflow_backward" else inputs["dy"].double().reshape(x.shape)
    g = dy * gamma
    dx_size = _max(rstd * (g.abs().amax(dim=1) + xhat.abs().amax(dim=1) * (g * xhat).abs().mean(dim=1))) \
        if x.numel() else 0.0
    dgamma_size, dbeta_size = _max((dy * xhat).abs().sum(dim=0)), _max(dy.abs().sum(dim=0))
    dgamma_reference_error = _max((dy.abs() * reference_xhat_error).sum(dim=0))
    if op == "overflow_backward":
        _, _, dgamma_terms, dbeta_terms = _overflow_param_sums(inputs)
        dgamma_size, dbeta_size = _max(dgamma_terms), _max(dbeta_terms)
    conditioned = rounding + COND_ROUNDINGS * spread
    return {"dx": (conditioned * dx_size, 0.0),
            "dgamma": (conditioned * dgamma_size + dgamma_reference_error, 0.0),
            "dbeta": (rounding * dbeta_size, 0.0)}


# ---- the cases ----

TAIL_HINT = "D is not a multiple of 32 or of the block size here: does every loop run to j < D, the tail included?"
HINTS = {
    "single_row": "B = 1: a single block does all the work",
    "many_rows": "more rows than blocks in one launch (65535): does each block loop over rows (row += gridDim.x)?",
    "nd": "x is [2, 3, 5, D]: rows = x.numel() / D, and mean and rstd have x's shape without its last dimension",
    "transposed": "x (and dy) are transposed views: make row-major copies (contiguous()) before using data_ptr",
    "sliced": "x, gamma and beta (and dy) are strided slices with NaN in the gaps: make row-major copies first",
    "empty": "no rows: launch nothing (a grid of 0 blocks is an error); y and dx are empty, dgamma and dbeta zeros",
    "large_mean": "|mean| >> std: subtract the mean before squaring; E[x^2] - E[x]^2 cancels catastrophically",
    "fp16": "fp16: sum in float (acc_type_t / at::opmath_type), keep mean and rstd in float, round only y or dx back",
    "bf16": "bf16: sum in float (acc_type_t / at::opmath_type), keep mean and rstd in float, round only y or dx back",
    "fp64": "float64 sums stay in double: acc_type_t<double> is double",
    "overflow": "B * D > 2^31 elements: compute row offsets in 64 bits (int64_t row * cols), never in int",
}


def _edge(what, shape, dtype=torch.float32, hint="", strided=(), layout="", **params):
    """One edge case as four tests: forward and backward, on the CPU and on the GPU."""
    cases = []
    for device in ("cpu", "cuda"):
        for op, short in (("forward", "fwd"), ("backward", "bwd")):
            names = tuple(n for n in strided if op == "backward" or n != "dy")
            cases.append(Case(f"{device}_{short}_{what}", f"{device}_{op}", device, 1.0,
                              dict(op=op, shape=shape, dtype=dtype, strided=names, layout=layout, **params),
                              checks=(INPUTS_UNCHANGED,), hint=hint or HINTS.get(what, "")))
    return cases


def _error(name, words, device="cpu", op="forward", **bad):
    return Case(name, f"{device}_errors", device, 0.5, dict(op=op, shape=(4, 64), bad=bad), kind="error",
                error_words=words, hint="check every argument with TORCH_CHECK and name it in the message")


CASES = [
    *_edge("d4097", (9, 4097), hint=TAIL_HINT),
    *_edge("nd", (2, 3, 5, 64)),
    *_edge("transposed", (64, 96), strided=("x", "dy"), layout="transposed"),
    *_edge("empty", (0, 64)),
    *_edge("fp16", (64, 4096), torch.float16),
    _error("error_gamma_shape", ("gamma",), gamma=lambda t: t[:-1]),
    _error("error_eps_zero", ("eps",), eps=lambda e: 0.0),
]

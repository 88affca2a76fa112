"""day03 LayerNorm backward: what is correct, and the cases that check it.

backward(dy [B, D], x [B, D], gamma [D], mean [B], rstd [B]) -> (dx [B, D], dgamma [D], dbeta [D])
layer_norm(x, gamma, beta, eps) -> y [B, D], differentiable (layernorm.py)

A case's inputs name what it runs ("op"):
- backward: the compiled op, on the mean and rstd given;
- rerun: the compiled op twice on the same inputs; the second run must give the same bits;
- layer_norm: the gradients of layer_norm, through autograd;
- gradcheck: torch.autograd.gradcheck of layer_norm in float64, a bool that must be True;
- frozen_params: gamma and beta do not require grad: backward must return None for them;
- saved_stats: layer_norm's gradients while counting forward calls: backward must use the
  saved mean and rstd, not run forward again.
Every op runs with torch.use_deterministic_algorithms(True), under which torch::empty hands
out memory filled with NaN: a buffer that is read before it is written shows up as NaN.
"""

import torch
import torch.nn.functional as F

from course.cases import INPUTS_UNCHANGED, OWN_KERNEL, POISON, ROTATED, SIDE_STREAM, Case
from course.harness import empty_is_nan

UNIT = "day03_layernorm_backward"
GRADIENTS = ("dx", "dgamma", "dbeta")
OUTPUT_NAMES = GRADIENTS  # of a backward case; output_names(inputs) names every op's
FORBIDDEN_OPS = ("aten::native_layer_norm_backward", "aten::layer_norm", "aten::native_layer_norm",
                 "aten::sum", "aten::mean", "aten::mul", "aten::sub", "aten::add", "aten::div")
EPS = 1e-5
# Rows of dy do not average to 0, so that a dx without its mean(g) term is wrong everywhere.
DY_MEAN = 0.5
# Allowed error: this many roundings of the dtype, times the size of what is rounded. For dx
# that is rstd * (|g| + |xhat| * mean|g * xhat|) of the worst row; for dgamma and dbeta the
# column sum of |dy * xhat| and of |dy|. float32 sums land well inside; a dropped term, row or
# strip is off by far more.
ROUNDINGS = 64

# Same values as dy, other strides, made on the device (a copy to the device would not keep them).
# NaN fills the gaps of the strided view: code that ignores the strides reads them.
LAYOUTS = {
    "transposed": lambda t: t.t().contiguous().t(),
    "every_other": lambda t: torch.stack([t, torch.full_like(t, float("nan"))], dim=-1)[..., 0],
}


def _statistics(x, eps):
    mean = x.mean(dim=1)
    return mean, 1 / torch.sqrt(((x - mean[:, None]) ** 2).mean(dim=1) + eps)


def make_inputs(case, generator):
    p = case.params
    dtype, op = p.get("dtype", torch.float32), p.get("op", "backward")
    rows, cols = p["shape"]
    x = (torch.randn(rows, cols, generator=generator, dtype=torch.float64) * p.get("std", 1.0)
         + p.get("mean", 0.0)).to(dtype)
    gamma = 1 + 0.5 * torch.randn(cols, generator=generator, dtype=torch.float64)
    beta = 0.5 * torch.randn(cols, generator=generator, dtype=torch.float64)
    dy = torch.randn(rows, cols, generator=generator, dtype=torch.float64) + DY_MEAN
    if op in ("backward", "rerun"):
        mean, rstd = _statistics(x.double(), EPS)  # as the forward would have saved them
        tensors = dict(dy=dy, x=x, gamma=gamma, mean=mean, rstd=rstd)
    elif op == "gradcheck":
        tensors = dict(x=x, gamma=gamma, beta=beta)
    else:
        tensors = dict(x=x, gamma=gamma, beta=beta, dy=dy)
    return {**{k: v.to(dtype) for k, v in tensors.items()}, "op": op, "eps": EPS}


def on_device(case, inputs):
    """Strided layouts and spoiled arguments are made here, where the op will see them."""
    p = case.params
    if "dy_layout" in p:
        inputs["dy"] = LAYOUTS[p["dy_layout"]](inputs["dy"])
    for name, spoil in p.get("bad", {}).items():
        inputs[name] = spoil(inputs[name])
    return inputs


def _backward(ext, inputs):
    return ext._ext.backward(inputs["dy"], inputs["x"], inputs["gamma"], inputs["mean"], inputs["rstd"])


def _rerun(ext, inputs):
    first = _backward(ext, inputs)
    second = _backward(ext, inputs)
    return (*first, *(b - a for a, b in zip(first, second)))


def _leaves(inputs, *names):
    return [inputs[name].detach().requires_grad_() for name in names]  # new leaves, same storage


def _layer_norm(ext, inputs):
    x, gamma, beta = _leaves(inputs, "x", "gamma", "beta")
    y = ext.layer_norm(x, gamma, beta, inputs["eps"])
    return torch.autograd.grad(y, (x, gamma, beta), inputs["dy"])


def _gradcheck(ext, inputs):
    x, gamma, beta = (inputs[n].detach().clone().requires_grad_() for n in ("x", "gamma", "beta"))  # nudged in place
    eps = inputs["eps"]
    passed = torch.autograd.gradcheck(lambda x, gamma, beta: ext.layer_norm(x, gamma, beta, eps),
                                      (x, gamma, beta), raise_exception=False)
    return torch.tensor(passed)


def _frozen_params(ext, inputs):
    (x,) = _leaves(inputs, "x")
    y = ext.layer_norm(x, inputs["gamma"], inputs["beta"], inputs["eps"])
    returned = []  # what LayerNormFunction.backward returned (autograd drops it otherwise)
    y.grad_fn.register_hook(lambda grads_from_backward, _: returned.append(grads_from_backward))
    (dx,) = torch.autograd.grad(y, x, inputs["dy"])
    _, dgamma, dbeta = returned[0]
    return dx, torch.tensor(dgamma is None), torch.tensor(dbeta is None)


def _saved_stats(ext, inputs):
    compiled, calls = ext._ext, []
    forward = compiled.forward

    def counted_forward(*args):
        calls.append(args)
        return forward(*args)

    compiled.forward = counted_forward
    try:
        dx, _, _ = _layer_norm(ext, inputs)
    finally:
        compiled.forward = forward
    return dx, torch.tensor(len(calls))


RUNS = {"backward": _backward, "rerun": _rerun, "layer_norm": _layer_norm, "gradcheck": _gradcheck,
        "frozen_params": _frozen_params, "saved_stats": _saved_stats}


def call(ext, inputs):
    """`ext` is the unit's entry module, layernorm.py; ext._ext is the compiled extension."""
    with empty_is_nan():
        return RUNS[inputs["op"]](ext, inputs)


def _from_formula(inputs):
    """The gradients of the mean and rstd given, by the formula in layernorm_backward.cu."""
    dy, x, gamma, mean, rstd = (inputs[n].double() for n in ("dy", "x", "gamma", "mean", "rstd"))
    xhat = (x - mean[:, None]) * rstd[:, None]
    g = dy * gamma
    dx = rstd[:, None] * (g - g.mean(dim=1, keepdim=True) - xhat * (g * xhat).mean(dim=1, keepdim=True))
    return dx, (dy * xhat).sum(dim=0), dy.sum(dim=0)


def _from_autograd(inputs):
    """PyTorch's own float64 LayerNorm and autograd: a derivation independent of the formula."""
    x, gamma, beta = (inputs[n].double().requires_grad_() for n in ("x", "gamma", "beta"))
    y = F.layer_norm(x, (x.shape[1],), gamma, beta, inputs["eps"])
    return torch.autograd.grad(y, (x, gamma, beta), inputs["dy"].double())


def reference(inputs):
    op = inputs["op"]
    if op == "gradcheck":
        return (torch.tensor(True),)
    dx, dgamma, dbeta = _from_formula(inputs) if op in ("backward", "rerun") else _from_autograd(inputs)
    if op == "rerun":
        return dx, dgamma, dbeta, torch.zeros_like(dx), torch.zeros_like(dgamma), torch.zeros_like(dbeta)
    if op == "frozen_params":
        return dx, torch.tensor(True), torch.tensor(True)
    if op == "saved_stats":
        return dx, torch.tensor(1)
    return dx, dgamma, dbeta


def output_names(inputs):
    return {"backward": GRADIENTS, "layer_norm": GRADIENTS,
            "rerun": GRADIENTS + tuple(f"{name} change on rerun" for name in GRADIENTS),
            "gradcheck": ("gradcheck_passed",),
            "frozen_params": ("dx", "dgamma is None", "dbeta is None"),
            "saved_stats": ("dx", "forward calls")}[inputs["op"]]


def output_dtypes(inputs):
    special = {"gradcheck_passed": torch.bool, "dgamma is None": torch.bool, "dbeta is None": torch.bool,
               "forward calls": torch.int64}
    return tuple(special.get(name, inputs["x"].dtype) for name in output_names(inputs))


def tolerance(inputs):
    """{output name: (atol, rtol)}: rounding allowances for the gradients, exact for the rest."""
    exact = {name: (0.0, 0.0) for name in output_names(inputs)}
    if inputs["op"] == "gradcheck" or inputs["x"].numel() == 0:
        return exact
    x, dy, gamma = inputs["x"].double(), inputs["dy"].double(), inputs["gamma"].double()
    mean, rstd = ((inputs["mean"].double(), inputs["rstd"].double()) if "mean" in inputs
                  else _statistics(x, inputs["eps"]))
    xhat = (x - mean[:, None]) * rstd[:, None]
    g = dy * gamma
    rounding = ROUNDINGS * torch.finfo(inputs["x"].dtype).eps
    dx_size = rstd * (g.abs().amax(dim=1) + xhat.abs().amax(dim=1) * (g * xhat).abs().mean(dim=1))
    allowed = {"dx": (rounding * dx_size.max().item(), 0.0),
               "dgamma": (rounding * (dy * xhat).abs().sum(dim=0).max().item(), 0.0),
               "dbeta": (rounding * dy.abs().sum(dim=0).max().item(), 0.0)}
    return {name: allowed.get(name, exact[name]) for name in exact}


DX_HINT = "dx = rstd * (g - mean(g) - xhat * mean(g * xhat)), g = dy * gamma, both means over the row's D features"
PARAMS_HINT = ("dgamma = sum over all rows of dy * xhat, dbeta = sum of dy: does stage 1 take every row of its "
               "strip and stage 2 add every strip's partials?")
TAIL_HINT = ("B is not a multiple of the rows per strip, nor D of 32 or 256: does every loop stop at its bound "
             "(j < D, row < end_row, col < D)?")
RERUN_HINT = ("two runs on the same inputs gave different bits: atomicAdd adds in whatever order the blocks "
              "finish; add the partials in a fixed order instead")
STABLE_HINT = ("|mean| >> std here: compute xhat = (x - mean) * rstd as written; expanding it into "
               "x * rstd - mean * rstd cancels catastrophically")
STRIDE_HINT = "dy is not contiguous here: make it row-major in backward (dy.contiguous()) before reading it"
FROZEN_HINT = "pass ctx.needs_input_grad[:3] to _ext.backward as output_mask: it returns None for frozen gamma and beta"
SAVED_HINT = "save mean and rstd in forward with ctx.save_for_backward; backward must not run forward again"
GRADCHECK_HINT = ("torch.autograd.gradcheck(layer_norm, (x, gamma, beta)) on small float64 inputs with "
                  "requires_grad=True prints the numerical and your analytical Jacobians")


def _values(name, device, shape, dtype=torch.float32, op="backward", hint="", **params):
    return Case(name, f"{device}_values", device, 1.0, dict(shape=shape, dtype=dtype, op=op, **params),
                checks=(INPUTS_UNCHANGED,), hint=hint)


def _gradients(name, device, shape, dtype=torch.float32, op="layer_norm", hint=DX_HINT):
    return Case(name, f"{device}_gradients", device, 1.0, dict(shape=shape, dtype=dtype, op=op),
                checks=(INPUTS_UNCHANGED,), hint=hint)


def _gradcheck_case(name, device, shape):
    return Case(name, f"{device}_gradients", device, 1.0, dict(shape=shape, dtype=torch.float64, op="gradcheck"),
                hint=GRADCHECK_HINT)


def _check(name, device, shape, check, hint=""):
    return Case(name, f"{device}_checks", device, 1.0, dict(shape=shape), checks=(check,), hint=hint)


def _error(name, words, device="cpu", **bad):
    return Case(name, f"{device}_errors", device, 0.5, dict(shape=(4, 64), bad=bad), kind="error",
                error_words=words, hint="check every argument in check_backward_inputs and name it")


CASES = [
    _values("cpu_fp64_small", "cpu", (4, 64), torch.float64, hint=DX_HINT),
    _values("cpu_fp32_tail", "cpu", (77, 100), hint=TAIL_HINT),
    _values("cuda_fp32_small", "cuda", (33, 333), hint=DX_HINT),
    _values("cuda_fp32_tail", "cuda", (77, 1000), hint=TAIL_HINT),
    _gradients("cpu_layer_norm_fp32", "cpu", (40, 96)),
    _gradients("cuda_layer_norm_fp32", "cuda", (100, 768)),
    _gradcheck_case("cpu_gradcheck_fp64", "cpu", (4, 6)),
    _gradients("cpu_frozen_params", "cpu", (8, 64), op="frozen_params", hint=FROZEN_HINT),
    _error("error_dy_shape", ("dy",), dy=lambda t: t[:, :-1]),
]
# BEGIN HIDDEN
CASES += [
    _values("cpu_fp32_single_row", "cpu", (1, 768), hint=DX_HINT),
    _values("cpu_fp64_one_feature", "cpu", (5, 1), torch.float64, hint=STABLE_HINT),
    _values("cpu_fp32_large_mean", "cpu", (64, 512), mean=300.0, std=0.1, hint=STABLE_HINT),
    _values("cpu_fp32_many_rows", "cpu", (3000, 40), hint=PARAMS_HINT),
    _values("cpu_empty_batch", "cpu", (0, 64), hint="no rows: dx is empty, dgamma and dbeta are zeros"),
    _values("cpu_rerun", "cpu", (500, 300), op="rerun", hint=RERUN_HINT),
    _values("cpu_transposed_dy", "cpu", (48, 80), dy_layout="transposed", hint=STRIDE_HINT),
    _check("cpu_own_code", "cpu", (64, 256), OWN_KERNEL),
    _check("cpu_no_cached_results", "cpu", (96, 384), ROTATED),
    _values("cuda_fp32_7", "cuda", (100, 7), hint=TAIL_HINT),
    _values("cuda_fp32_33", "cuda", (65, 33), hint=TAIL_HINT),
    _values("cuda_fp32_768", "cuda", (257, 768)),
    _values("cuda_fp32_4097", "cuda", (40, 4097), hint=TAIL_HINT),
    _values("cuda_fp32_8192", "cuda", (300, 8192)),
    _values("cuda_fp32_single_row", "cuda", (1, 4097), hint=TAIL_HINT),
    _values("cuda_fp32_one_element", "cuda", (1, 1), hint=TAIL_HINT),
    _values("cuda_fp32_many_rows", "cuda", (70000, 32), hint=PARAMS_HINT),
    _values("cuda_fp32_large_mean", "cuda", (64, 1024), mean=300.0, std=0.1, hint=STABLE_HINT),
    _values("cuda_fp64_1000", "cuda", (13, 1000), torch.float64),
    _values("cuda_fp64_tail", "cuda", (64, 333), torch.float64, hint=TAIL_HINT),
    _values("cuda_empty_batch", "cuda", (0, 64), hint="no rows: dx is empty, dgamma and dbeta are zeros"),
    _values("cuda_rerun", "cuda", (4096, 1024), op="rerun", hint=RERUN_HINT),
    _values("cuda_transposed_dy", "cuda", (64, 300), dy_layout="transposed", hint=STRIDE_HINT),
    _values("cuda_strided_dy", "cuda", (33, 500), dy_layout="every_other", hint=STRIDE_HINT),
    _check("cuda_every_element_written", "cuda", (257, 1000), POISON,
           hint="outputs start as NaN: every dx, dgamma and dbeta element must be written"),
    _check("cuda_current_stream", "cuda", (512, 1024), SIDE_STREAM,
           hint="launch on c10::cuda::getCurrentCUDAStream(), not the default stream (<<<grid, block, 0, stream>>>)"),
    _check("cuda_no_cached_results", "cuda", (64, 4096), ROTATED),
    _check("cuda_own_kernel", "cuda", (64, 1024), OWN_KERNEL),
    _gradients("cpu_layer_norm_fp64", "cpu", (5, 77), torch.float64),
    _gradients("cuda_layer_norm_fp64", "cuda", (13, 300), torch.float64),
    _gradients("cuda_layer_norm_large", "cuda", (1000, 4096)),
    _gradcheck_case("cpu_gradcheck_fp64_tail", "cpu", (3, 33)),
    _gradcheck_case("cpu_gradcheck_fp64_many_rows", "cpu", (40, 3)),
    _gradcheck_case("cuda_gradcheck_fp64", "cuda", (6, 40)),
    _gradcheck_case("cuda_gradcheck_fp64_tail", "cuda", (24, 33)),
    _gradcheck_case("cuda_gradcheck_fp64_many_rows", "cuda", (40, 3)),
    _gradients("cuda_frozen_params", "cuda", (64, 300), op="frozen_params", hint=FROZEN_HINT),
    _gradients("cpu_saved_statistics", "cpu", (8, 64), op="saved_stats", hint=SAVED_HINT),
    _gradients("cuda_saved_statistics", "cuda", (64, 256), op="saved_stats", hint=SAVED_HINT),
    _error("error_x_not_2d", ("x",), x=lambda t: t[0]),
    _error("error_x_integer", ("x",), x=lambda t: t.round().to(torch.int32)),
    _error("error_x_not_contiguous", ("x", "contiguous"), x=LAYOUTS["every_other"]),
    _error("error_dy_dtype", ("dy",), dy=lambda t: t.double()),
    _error("error_gamma_shape", ("gamma",), gamma=lambda t: t[:-1]),
    _error("error_mean_shape", ("mean",), mean=lambda t: torch.cat([t, t])),
    _error("error_rstd_dtype", ("rstd",), rstd=lambda t: t.double()),
    _error("error_mean_on_cpu", ("mean",), device="cuda", mean=lambda t: t.cpu()),
    _error("error_dy_on_cpu", ("dy",), device="cuda", dy=lambda t: t.cpu()),
]
# END HIDDEN

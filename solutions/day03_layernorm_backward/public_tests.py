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

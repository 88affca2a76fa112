"""What the LayerNorm units' suites (day02 to day05) share: their random inputs, the float64
references, the error model of their tolerances and the builders of their cases.

Everything here computes in float64 on the inputs as given (fp16 and bf16 ones already
rounded), on rows: x [..., D] is x.numel() / D rows of D features.
"""
import torch
import torch.nn.functional as F

from course.cases import INPUTS_UNCHANGED, Case, standard_normal

EPS = 1e-5
DY_MEAN = 0.5  # rows of dy do not average to 0, so that a dx without its mean(g) term is wrong everywhere
FORWARD_OUTPUTS = ("y", "mean", "rstd")
GRADIENTS = ("dx", "dgamma", "dbeta")
# The dtype of mean and rstd, and of the sums behind every output: float32 for 16-bit x.
STATS_DTYPE = {torch.float16: torch.float32, torch.bfloat16: torch.float32, torch.float32: torch.float32,
               torch.float64: torch.float64}

STREAM_HINT = "launch on c10::cuda::getCurrentCUDAStream(), not the default stream (<<<grid, block, 0, stream>>>)"
CHECK_HINT = "check every argument with TORCH_CHECK and name it in the message"


# ---- inputs ----

def random_x(params, generator, dtype):
    """x of params["shape"] for an input of `dtype`, each value drawn around params' mean with
    its std (in float32 or float64: standard_normal); the caller rounds it to `dtype`."""
    x = standard_normal(params["shape"], generator, dtype)
    return x * params.get("std", 1.0) + params.get("mean", 0.0)


def random_affine(cols, generator, dtype):
    """gamma around 1 and beta around 0, for inputs of `dtype`: a scale or shift the op drops
    shows. The caller rounds them to `dtype`."""
    gamma = 1 + 0.5 * standard_normal(cols, generator, dtype)
    return gamma, 0.5 * standard_normal(cols, generator, dtype)


def random_dy(shape, generator, dtype):
    return (standard_normal(shape, generator, dtype) + DY_MEAN).to(dtype)


def saved_statistics(x):
    """mean and rstd of x as forward saves them (in STATS_DTYPE): a backward alone is judged on them."""
    mean, rstd = statistics(x.double())
    return mean.to(STATS_DTYPE[x.dtype]), rstd.to(STATS_DTYPE[x.dtype])


# ---- calls ----

def compiled_backward(ext, inputs):
    """The compiled backward on the mean and rstd given (ext._ext: the compiled extension)."""
    return ext._ext.backward(inputs["dy"], inputs["x"], inputs["gamma"], inputs["mean"], inputs["rstd"])


# ---- what is right ----

def statistics(x, eps=EPS):
    """mean and rstd of each row of x, in float64."""
    mean = x.mean(dim=-1)
    return mean, 1 / torch.sqrt(((x - mean[..., None]) ** 2).mean(dim=-1) + eps)


def _xhat(x, mean, rstd):
    return (x - mean[..., None]) * rstd[..., None]


def layer_norm64(x, gamma, beta, eps=EPS):
    """(y, mean, rstd) of x in float64."""
    mean, rstd = statistics(x, eps)
    return _xhat(x, mean, rstd) * gamma + beta, mean, rstd


def dx_formula(dy, x, gamma, mean, rstd):
    """dx on the mean and rstd given (layernorm_backward.cu's formula), where those are inputs,
    not results: dx = rstd * (g - mean(g) - xhat * mean(g * xhat)), g = dy * gamma."""
    xhat = _xhat(x, mean, rstd)
    g = dy * gamma
    return rstd[..., None] * (g - g.mean(dim=-1, keepdim=True) - xhat * (g * xhat).mean(dim=-1, keepdim=True))


def formula_gradients(dy, x, gamma, mean, rstd):
    """(dx, dgamma, dbeta) on the mean and rstd given: dgamma and dbeta sum over every row."""
    cols = x.shape[-1]
    dy_rows, xhat_rows = dy.reshape(-1, cols), _xhat(x, mean, rstd).reshape(-1, cols)
    return dx_formula(dy, x, gamma, mean, rstd), (dy_rows * xhat_rows).sum(0), dy_rows.sum(0)


def autograd_gradients64(x, gamma, beta, dy, eps=EPS):
    """PyTorch's own float64 LayerNorm and autograd: a derivation independent of the kernels'."""
    x, gamma, beta = (t.double().requires_grad_() for t in (x, gamma, beta))
    y = F.layer_norm(x, (x.shape[-1],), gamma, beta, eps)
    return torch.autograd.grad(y, (x, gamma, beta), dy.double())


def forward_dtypes(name="x"):
    """The dtypes of forward's outputs: y of input `name`'s dtype, mean and rstd of its STATS_DTYPE."""
    return lambda inputs: (inputs[name].dtype, STATS_DTYPE[inputs[name].dtype], STATS_DTYPE[inputs[name].dtype])


# ---- how far from it an answer may be ----
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


def max_abs(t):
    return t.abs().max().item() if t.numel() else 0.0


def rounding(dtype, output_roundings=OUTPUT_ROUNDINGS):
    """The relative error of a sum accumulated in STATS_DTYPE and rounded to dtype."""
    return ROUNDINGS * torch.finfo(STATS_DTYPE[dtype]).eps + output_roundings * torch.finfo(dtype).eps / 2


def condition_by_std(x, mean, rstd):
    """max over rows of |mean| / std: how far float32 rounding of the mean moves x - mean."""
    if x.numel() == 0 or x.shape[-1] == 1:
        return 0.0
    return (x.mean(dim=1).abs() / x.std(dim=1, unbiased=False).clamp_min(1e-300)).max().item()


def condition_by_rstd(x, mean, rstd):
    """max over rows of |mean| * rstd: |mean| / std, where eps bounds rstd."""
    return (mean.abs() * rstd).max().item() if x.numel() else 0.0


def _reference_xhat_error(x, mean, rstd):
    """How far the float64 reference's own x̂ is off: ~eps64 * (|x| + |mean|) * rstd. Where x̂
    is 0 (D = 1) its dgamma comes out as 1e-13, not 0."""
    return ROUNDINGS * torch.finfo(torch.float64).eps * (x.abs() + mean.abs()[:, None]) * rstd[:, None]


def gradient_sizes(dy, x, gamma, mean, rstd):
    """The size of what each gradient sums, for rows [rows, D]: of dx, rstd * (|g| + |xhat| *
    mean|g * xhat|) in the worst row; of dgamma and dbeta, the largest column sum of |dy * xhat|
    and of |dy|."""
    xhat, g = _xhat(x, mean, rstd), dy * gamma
    dx = max_abs(rstd * (g.abs().amax(dim=1) + xhat.abs().amax(dim=1) * (g * xhat).abs().mean(dim=1))) \
        if dy.numel() else 0.0
    return dx, max_abs((dy * xhat).abs().sum(dim=0)), max_abs(dy.abs().sum(dim=0))


def gradient_tolerance(sizes, plain, conditioned, dgamma_error=0.0):
    """{dx, dgamma, dbeta: (atol, rtol)}: relative errors `conditioned` of dx's and dgamma's sizes
    (they carry x - mean) and `plain` of dbeta's, plus what the reference's own dgamma is off by."""
    dx_size, dgamma_size, dbeta_size = sizes
    return {"dx": (conditioned * dx_size, 0.0), "dgamma": (conditioned * dgamma_size + dgamma_error, 0.0),
            "dbeta": (plain * dbeta_size, 0.0)}


def forward_tolerance(x, gamma, beta, dtype, condition, reference_error=False):
    """{y, mean, rstd: (atol, rtol)} for rows x [rows, D] of dtype. condition(x, mean, rstd):
    the rows' |mean| / std; reference_error: also allow what the reference's own x̂ is off by."""
    acc_eps = torch.finfo(STATS_DTYPE[dtype]).eps
    mean, rstd = statistics(x)
    spread = acc_eps * condition(x, mean, rstd)  # the relative error float32 rounding of the mean leaves in x - mean
    xhat = _xhat(x, mean, rstd)
    own = max_abs(_reference_xhat_error(x, mean, rstd)) if reference_error else 0.0
    atol = rounding(dtype) * (max_abs(xhat * gamma) + max_abs(beta)) + (COND_ROUNDINGS * spread + own) * max_abs(gamma)
    return {"y": (atol, torch.finfo(dtype).eps), "mean": (ROUNDINGS * acc_eps * max_abs(x), 0.0),
            "rstd": (0.0, ROUNDINGS * acc_eps + spread)}


def backward_tolerance(x, gamma, dy, dtype, condition, reference_error=False, param_sizes=None):
    """{dx, dgamma, dbeta: (atol, rtol)} for rows x and dy [rows, D] of dtype; param_sizes: the
    sizes of dgamma and dbeta where the rows given are not all it sums."""
    mean, rstd = statistics(x)
    spread = torch.finfo(STATS_DTYPE[dtype]).eps * condition(x, mean, rstd)
    sizes = gradient_sizes(dy, x, gamma, mean, rstd)
    if param_sizes is not None:
        sizes = (sizes[0], *param_sizes)
    own = max_abs((dy.abs() * _reference_xhat_error(x, mean, rstd)).sum(dim=0)) if reference_error else 0.0
    return gradient_tolerance(sizes, rounding(dtype), rounding(dtype) + COND_ROUNDINGS * spread, own)


# ---- cases ----

def values_case(name, device, shape, dtype=torch.float32, points=1.0, checks=(INPUTS_UNCHANGED,), hint="",
                group="values", **params):
    """A case whose outputs are compared with the reference, in group f"{device}_{group}"."""
    return Case(name, f"{device}_{group}", device, points, dict(shape=shape, dtype=dtype, **params),
                checks=checks, hint=hint)


def check_case(name, device, shape, check, hint=""):
    """A case for one of the harness's extra checks (course.cases: POISON, ROTATED, ...)."""
    return Case(name, f"{device}_checks", device, 1.0, dict(shape=shape), checks=(check,), hint=hint)



# ---- what a wrong output says: the usual slips, as models of the outputs they give ----
# (course.hints.model_reading names the one a wrong output follows)

def forward_slips(name, inputs):
    """The forward's slips, as its output `name` (y, mean or rstd) comes out under each."""
    x, gamma, beta, eps = inputs["x"].double(), inputs["gamma"].double(), inputs["beta"].double(), inputs["eps"]
    index = FORWARD_OUTPUTS.index(name)
    slips = {}
    if x.shape[-1] > 1:  # one feature: D - 1 is 0
        mean = x.mean(dim=-1)
        rstd = 1 / torch.sqrt(x.var(dim=-1, correction=1) + eps)
        slips[f"{name} matches a LayerNorm whose variance divides by D - 1, not by D: check what the sum of "
              "squares is divided by"] = (_xhat(x, mean, rstd) * gamma + beta, mean, rstd)[index]
    if eps != EPS:
        slips[f"{name} matches a LayerNorm with eps = {EPS:g}, not the eps passed ({eps:g}): check where eps "
              "comes from"] = layer_norm64(x, gamma, beta)[index]
    return slips


def backward_slips(name, inputs):
    """The backward's slips, as its output `name` (dx, dgamma or dbeta) comes out under each: on
    the mean and rstd given where they are inputs, else on those of x."""
    x, dy, gamma = (inputs[n].double() for n in ("x", "dy", "gamma"))
    mean, rstd = ((inputs["mean"].double(), inputs["rstd"].double()) if "mean" in inputs
                  else statistics(x, inputs["eps"]))
    xhat, g = _xhat(x, mean, rstd), dy * gamma
    if name == "dx":
        return {"dx matches rstd * (g - xhat * mean(g * xhat)), g = dy * gamma: the mean(g) term is missing":
                rstd[..., None] * (g - xhat * (g * xhat).mean(dim=-1, keepdim=True))}
    if name == "dbeta":
        cols = x.shape[-1]
        return {"dbeta matches the sum of dy * xhat over the rows (dgamma's sum), not the sum of dy":
                (dy.reshape(-1, cols) * xhat.reshape(-1, cols)).sum(dim=0)}
    return {}


def summed_terms(name, inputs):
    """What dgamma or dbeta sums over the rows, [rows, D]; None for another output."""
    x, dy = inputs["x"].double(), inputs["dy"].double()
    cols = x.shape[-1]
    if name == "dbeta":
        return dy.reshape(-1, cols)
    if name != "dgamma":
        return None
    mean, rstd = ((inputs["mean"].double(), inputs["rstd"].double()) if "mean" in inputs
                  else statistics(x, inputs["eps"]))
    return (dy * _xhat(x, mean, rstd)).reshape(-1, cols)

"""day02 LayerNorm forward: what is correct, and the cases that check it.

forward(x [B, D], gamma [D], beta [D], eps) -> (y [B, D], mean [B], rstd [B])
"""
import torch

from course.cases import INPUTS_UNCHANGED, OWN_KERNEL, POISON, ROTATED, SIDE_STREAM, Case

UNIT = "day02_layernorm_forward"
OUTPUT_NAMES = ("y", "mean", "rstd")
FORBIDDEN_OPS = ("aten::layer_norm", "aten::native_layer_norm", "aten::group_norm", "aten::batch_norm",
                 "aten::var_mean", "aten::var", "aten::std", "aten::mean")
# (atol, rtol) by input dtype for y and mean: float32 math lands near 1e-6; a result
# computed in fp16 or bf16 is off by 1e-3 or more, and fails.
TOLERANCES = {torch.float32: (1e-4, 1e-4), torch.float64: (1e-10, 1e-10)}
# rstd is relative by nature; float32 gets it within a few ulp, and a variance divided
# by D - 1 instead of D is off by 1/(2D): caught up to D of several thousand.
RSTD_RTOL = {torch.float32: 1e-5, torch.float64: 1e-10}
# Rows with |mean| >> std are ill-conditioned. Even a stable fp32 algorithm rounds the
# mean by ~eps*|mean|, which y magnifies by 1/std; Welford's rstd is off by ~eps*|mean|/std
# relative. Allow y and rstd that many roundings ("condition" = max |mean|/std); the unstable
# E[x^2] - E[x]^2 is off by ~eps*condition^2 and still fails.
Y_ROUNDINGS = 64
RSTD_ROUNDINGS = 4


def make_inputs(case, generator):
    p = case.params
    dtype = p.get("dtype", torch.float32)
    rows, cols = p["shape"]
    x = torch.randn(rows, cols, generator=generator, dtype=torch.float64) * p.get("std", 1.0) + p.get("mean", 0.0)
    gamma = 1 + 0.5 * torch.randn(cols, generator=generator, dtype=torch.float64)
    beta = 0.5 * torch.randn(cols, generator=generator, dtype=torch.float64)
    return {"x": x.to(dtype), "gamma": gamma.to(dtype), "beta": beta.to(dtype), "eps": p.get("eps", 1e-5)}


def on_device(case, inputs):
    """Error cases spoil one argument, on the device, where the op will see it."""
    for name, spoil in case.params.get("bad", {}).items():
        inputs[name] = spoil(inputs[name])
    return inputs


def call(ext, inputs):
    return ext.forward(inputs["x"], inputs["gamma"], inputs["beta"], inputs["eps"])


def reference(inputs):
    x = inputs["x"].double()
    mean = x.mean(dim=1)
    var = ((x - mean[:, None]) ** 2).mean(dim=1)
    rstd = 1 / torch.sqrt(var + inputs["eps"])
    y = (x - mean[:, None]) * rstd[:, None] * inputs["gamma"].double() + inputs["beta"].double()
    return y, mean, rstd


def output_dtypes(inputs):
    return (inputs["x"].dtype,) * 3


def tolerance(inputs):
    x = inputs["x"].double()
    atol, rtol = TOLERANCES[inputs["x"].dtype]
    condition = 0.0
    if x.numel() and x.shape[1] > 1:
        condition = (x.mean(dim=1).abs() / x.std(dim=1).clamp_min(1e-30)).max().item()
    eps = torch.finfo(inputs["x"].dtype).eps
    return {"y": (atol + Y_ROUNDINGS * eps * condition, rtol), "mean": (atol, rtol),
            "rstd": (0.0, RSTD_RTOL[inputs["x"].dtype] + RSTD_ROUNDINGS * eps * condition)}


def _values(name, device, shape, dtype=torch.float32, points=1.0, checks=(INPUTS_UNCHANGED,), hint="", **params):
    group = f"{device}_values"
    return Case(name, group, device, points, dict(shape=shape, dtype=dtype, **params), checks=checks, hint=hint)


def _error(name, words, device="cpu", **bad):
    return Case(name, f"{device}_errors", device, 0.5, dict(shape=(4, 64), bad=bad), kind="error",
                error_words=words, hint="check every argument in check_inputs with TORCH_CHECK and name it")


TAIL_HINT = "D is not a multiple of 32 (or of the block size): does every loop run to j < D?"

CASES = [
    _values("cpu_fp64_small", "cpu", (4, 64), torch.float64),
    _values("cpu_fp32_tail", "cpu", (8, 100), hint=TAIL_HINT),
    _values("cuda_fp32_small", "cuda", (16, 128)),
    _values("cuda_fp32_tail", "cuda", (33, 1000), hint=TAIL_HINT),
    _values("cuda_fp64_4097", "cuda", (8, 4097), torch.float64, hint=TAIL_HINT),
    _error("error_gamma_shape", ("gamma",), gamma=lambda g: g[:-1]),
]
# BEGIN HIDDEN
CASES += [
    _values("cpu_fp32_single_row", "cpu", (1, 768)),
    _values("cpu_fp64_one_feature", "cpu", (5, 1), torch.float64),
    _values("cpu_fp32_large_mean", "cpu", (16, 512), mean=300.0, std=1.0,
            hint="subtract the mean before squaring: E[x^2] - E[x]^2 cancels catastrophically"),
    _values("cpu_empty_batch", "cpu", (0, 64)),
    Case("cpu_own_code", "cpu_checks", "cpu", 1.0, dict(shape=(8, 256)), checks=(OWN_KERNEL,)),
    Case("cpu_no_cached_results", "cpu_checks", "cpu", 1.0, dict(shape=(32, 384)), checks=(ROTATED,)),
    _values("cuda_fp32_one_feature", "cuda", (3, 1)),
    _values("cuda_fp32_7", "cuda", (100, 7), hint=TAIL_HINT),
    _values("cuda_fp32_33", "cuda", (64, 33), hint=TAIL_HINT),
    _values("cuda_fp32_768", "cuda", (257, 768)),
    _values("cuda_fp32_4096", "cuda", (1000, 4096)),
    _values("cuda_fp32_65536", "cuda", (3, 65536)),
    _values("cuda_fp32_many_rows", "cuda", (70000, 32),
            hint="more rows than one launch's blocks: loop over rows (grid-stride) or size the grid to B"),
    _values("cuda_fp32_large_mean", "cuda", (64, 1024), mean=300.0, std=1.0,
            hint="subtract the mean before squaring: E[x^2] - E[x]^2 cancels catastrophically"),
    _values("cuda_fp64_1000", "cuda", (13, 1000), torch.float64),
    _values("cuda_empty_batch", "cuda", (0, 64)),
    Case("cuda_every_element_written", "cuda_checks", "cuda", 1.0, dict(shape=(257, 1000)), checks=(POISON,),
         hint="outputs start as NaN: every y, mean and rstd element must be written"),
    Case("cuda_current_stream", "cuda_checks", "cuda", 1.0, dict(shape=(512, 1024)), checks=(SIDE_STREAM,),
         hint="launch on c10::cuda::getCurrentCUDAStream(), not the default stream (<<<grid, block, 0, stream>>>)"),
    Case("cuda_no_cached_results", "cuda_checks", "cuda", 1.0, dict(shape=(64, 4096)), checks=(ROTATED,)),
    Case("cuda_own_kernel", "cuda_checks", "cuda", 1.0, dict(shape=(64, 1024)), checks=(OWN_KERNEL,)),
    _error("error_x_not_2d", ("x",), x=lambda x: x[0]),
    _error("error_x_integer", ("x",), x=lambda x: x.round().to(torch.int32)),
    _error("error_beta_shape", ("beta",), beta=lambda b: torch.cat([b, b])),
    _error("error_gamma_dtype", ("gamma",), gamma=lambda g: g.double()),
    _error("error_eps_zero", ("eps",), eps=lambda e: 0.0),
    _error("error_eps_negative", ("eps",), eps=lambda e: -1e-5),
    _error("error_x_not_contiguous", ("contiguous",), x=lambda x: torch.cat([x, x], 1)[:, ::2]),
    _error("error_gamma_on_cpu", ("gamma",), device="cuda", gamma=lambda g: g.cpu()),
]
# END HIDDEN

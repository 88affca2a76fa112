"""day02 LayerNorm forward: what is correct, and the cases that check it.

forward(x [B, D], gamma [D], beta [D], eps) -> (y [B, D], mean [B], rstd [B])
"""
import torch

from course.cases import OWN_KERNEL, POISON, ROTATED, SIDE_STREAM, Case
from course.hints import model_reading
from course.ops import Op

from ..common.error_cases import error_case, spoil
from ..common.layernorm_tests import FORWARD_OUTPUTS, forward_slips, layer_norm64, random_affine, random_x, values_case
from ..common.tiled_rows import last_of, last_rows, random_tile, tiled_rows

UNIT = "day02_layernorm_forward"
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
    if p.get("tiled"):  # past 2^31 elements: x is built on the GPU from a tile (common/tiled_rows.py)
        x = {"tile": random_tile(p["shape"][1], generator).to(dtype), "rows": p["shape"][0]}
    else:
        x = {"x": random_x(p, generator, dtype).to(dtype)}
    gamma, beta = random_affine(p["shape"][1], generator, dtype)
    return {**x, "gamma": gamma.to(dtype), "beta": beta.to(dtype), "eps": p.get("eps", 1e-5)}


def on_device(case, inputs):
    """A tiled case's x is built here, on the device; error cases spoil one argument, where the
    op will see it."""
    if "tile" in inputs:
        inputs["x"] = tiled_rows(inputs["tile"], inputs["rows"])
    return spoil(case, inputs)


def _forward(ext, inputs):
    outputs = ext.forward(inputs["x"], inputs["gamma"], inputs["beta"], inputs["eps"])
    return last_of(outputs) if "tile" in inputs else outputs  # a tiled case's last rows, not 8 GiB


def _x64(inputs):
    """x in float64; a tiled case's last rows, rebuilt from its tile."""
    return last_rows(inputs["tile"], inputs["rows"]) if "tile" in inputs else inputs["x"].double()


def _dtypes(inputs):
    return (inputs["tile" if "tile" in inputs else "x"].dtype,) * 3  # mean, rstd: x's dtype


def _slips(name, inputs):
    """The usual slips' outputs; none for a tiled case, whose x is never whole on the host."""
    return {} if "tile" in inputs else forward_slips(name, inputs)


def _reference(inputs):
    return layer_norm64(_x64(inputs), inputs["gamma"].double(), inputs["beta"].double(), inputs["eps"])


def _tolerance(inputs):
    x = _x64(inputs)
    dtype = _dtypes(inputs)[0]
    atol, rtol = TOLERANCES[dtype]
    condition = 0.0
    if x.numel() and x.shape[1] > 1:
        condition = (x.mean(dim=1).abs() / x.std(dim=1).clamp_min(1e-30)).max().item()
    eps = torch.finfo(dtype).eps
    return {"y": (atol + Y_ROUNDINGS * eps * condition, rtol), "mean": (atol, rtol),
            "rstd": (0.0, RSTD_RTOL[dtype] + RSTD_ROUNDINGS * eps * condition)}


OPS = {"forward": Op(_forward, _reference, FORWARD_OUTPUTS, _dtypes, _tolerance,
                     diagnose=model_reading(_slips, _reference, FORWARD_OUTPUTS, _tolerance))}

# What the op runs of the code students write ("file, function", as its TODO line names it), by
# path: a public test runs as soon as its own are written (course/todos.py), so the CPU tests
# before the kernel, and the argument checks' before the CPU loop. layernorm.cpp's forward
# refuses while they are unwritten: the checks first, then the rest of its path.
CHECKS = ("layernorm.cpp, check_inputs",)
FUNCTIONS_RUN = {
    "forward": {"cpu": CHECKS + ("layernorm.cpp, forward_cpu",),
                "cuda": CHECKS + ("layernorm.cpp, forward_cuda", "layernorm_forward.cu, layernorm_forward_kernel",
                                  "reductions.cuh, warp_reduce_sum")},
    "forward errors": {"cpu": CHECKS, "cuda": CHECKS},
}

_values = values_case  # a case of today's op against the reference


def _error(name, words, device="cpu", **bad):
    return error_case(name, words, "check every argument in check_inputs with TORCH_CHECK and name it",
                      ("x", "gamma", "beta", "eps"), device, bad=bad)


TAIL_HINT = "D is not a multiple of 32 (or of the block size): does every loop run to j < D?"

CASES = [
    _values("cpu_fp64_small", "cpu", (4, 64), torch.float64),
    _values("cpu_fp32_tail", "cpu", (8, 100), hint=TAIL_HINT),
    _values("cuda_fp32_small", "cuda", (16, 128)),
    _values("cuda_fp32_tail", "cuda", (33, 1000), hint=TAIL_HINT),
    _values("cuda_fp64_4097", "cuda", (8, 4097), torch.float64, hint=TAIL_HINT),
    _error("error_gamma_shape", ("gamma",), gamma=lambda g: g[:-1]),
]

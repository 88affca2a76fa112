"""The ops as users call them, on either backend, and the fake kernels of the CUDA ones.

backend "cuda": torch.ops.rmsnorm_int8 (rmsnorm_ops.cpp; its CPU kernels take CPU tensors);
backend "triton": torch.ops.rmsnorm_triton (rmsnorm_triton.py, GPU only).

    rms_norm(x, weight=None, eps=None)               = F.rms_norm(x, [D], weight, eps), differentiable
    rms_norm_quant(x, weight, eps=None)              -> (q int8, scale float32 per row)
    add_rms_norm_quant(x, residual, weight, eps=None) -> (q, scale); residual += x, in place

eps=None means torch.finfo(x.dtype).eps, as in F.rms_norm.
"""
import torch

import rmsnorm_triton  # defines torch.ops.rmsnorm_triton

BACKENDS = ("cuda", "triton")


# ---- fake kernels: shapes, dtypes and devices of the outputs, computing nothing ----

def _stats_dtype(x):
    return torch.float64 if x.dtype == torch.float64 else torch.float32


@torch.library.register_fake("rmsnorm_int8::rms_norm")
def _rms_norm_fake(x, weight, eps):
    return x.new_empty(x.shape), x.new_empty(x.shape[:-1], dtype=_stats_dtype(x))


@torch.library.register_fake("rmsnorm_int8::rms_norm_backward")
def _rms_norm_backward_fake(dy, x, weight, rstd):
    return x.new_empty(x.shape), x.new_empty(x.shape[-1:])


@torch.library.register_fake("rmsnorm_int8::rms_norm_quant")
def _rms_norm_quant_fake(x, weight, eps):
    # BEGIN SOLUTION
    return x.new_empty(x.shape, dtype=torch.int8), x.new_empty(x.shape[:-1], dtype=torch.float32)
    # STUB
    raise NotImplementedError("TODO(day09): rmsnorm_int8.py, _rms_norm_quant_fake: return new empty tensors, q shaped "
                              "like x in int8 and scale shaped x.shape[:-1] in float32")
    # END SOLUTION


@torch.library.register_fake("rmsnorm_int8::add_rms_norm_quant")
def _add_rms_norm_quant_fake(x, residual, weight, eps):
    return _rms_norm_quant_fake(x, weight, eps)  # residual is written in place: nothing new to describe


# ---- the functional forms ----

def ops(backend):
    if backend not in BACKENDS:
        raise ValueError(f"backend must be one of {', '.join(BACKENDS)}, got {backend!r}")
    return torch.ops.rmsnorm_int8 if backend == "cuda" else torch.ops.rmsnorm_triton


def _eps(x, eps):
    return torch.finfo(x.dtype).eps if eps is None else float(eps)


# Each operator's one overload, looked up once: torch.ops' lookups and its choice of overload
# cost host time on every call.
_OPERATORS = {(backend, name): getattr(ops(backend), name).default
              for backend in BACKENDS for name in ("rms_norm", "rms_norm_quant", "add_rms_norm_quant")}


def _call(backend, name, x, *args):
    """The operator, or in eager mode on real CUDA tensors the Triton function it wraps, which
    skips the operator's Python dispatch (rmsnorm_triton.py)."""
    if backend == "triton" and type(x) is torch.Tensor and x.is_cuda and not torch.compiler.is_compiling():
        return rmsnorm_triton.EAGER[name](x, *args)
    operator = _OPERATORS.get((backend, name))
    return operator(x, *args) if operator is not None else getattr(ops(backend), name)(x, *args)


def rms_norm(x, weight=None, eps=None, backend="cuda"):
    return _call(backend, "rms_norm", x, weight, _eps(x, eps))[0]


def rms_norm_quant(x, weight, eps=None, backend="cuda"):
    return _call(backend, "rms_norm_quant", x, weight, _eps(x, eps))


def add_rms_norm_quant(x, residual, weight, eps=None, backend="cuda"):
    return _call(backend, "add_rms_norm_quant", x, residual, weight, _eps(x, eps))


def rms_norm_quant_unfused(x, weight, eps=None, residual=None):
    """The same in plain PyTorch, one op at a time: what the fused kernels replace, and what
    the benchmark compiles with torch.compile. With a residual, returns (q, scale, residual)."""
    if residual is not None:
        x = residual = (x.float() + residual.float()).to(x.dtype)
    y = torch.nn.functional.rms_norm(x.float(), x.shape[-1:], weight.float(), _eps(x, eps))
    scale = y.abs().amax(-1) / 127
    q = torch.where(scale[..., None] == 0, 0.0, torch.round(y / scale[..., None])).clamp(-127, 127).to(torch.int8)
    return (q, scale) if residual is None else (q, scale, residual)

"""The fake kernels, and the functional form, layer_norm.

A fake kernel gives an operator's outputs' shapes, dtypes and devices from the inputs' alone,
computing nothing. torch.compile traces with fake tensors (no data), so an operator without
one cannot be compiled, and opcheck fails it. (The autograd formula is in C++, with the
kernels: csrc/layernorm_ops.cpp.)
"""
from __future__ import annotations

import torch


def _stats_dtype(dtype: torch.dtype) -> torch.dtype:
    return torch.float64 if dtype == torch.float64 else torch.float32


@torch.library.register_fake("fast_layernorm::forward")
def _forward_fake(x, weight, bias, eps):
    raise NotImplementedError("TODO(day07): fast_layernorm/ops.py, _forward_fake: return new empty tensors: y shaped "
                              "like x, mean and rstd shaped x.shape[:-1] in float32 (float64 for float64 x)")


@torch.library.register_fake("fast_layernorm::backward")
def _backward_fake(dy, x, weight, mean, rstd):
    raise NotImplementedError("TODO(day07): fast_layernorm/ops.py, _backward_fake: return new empty tensors of x's "
                              "dtype: dx shaped like x, dweight and dbias of shape [D]")


# torch.nn.functional.layer_norm(x, normalized_shape, weight, bias, eps) as an operator
# (csrc/layernorm_ops.cpp): users' calls reach C++ with no Python function in between.
layer_norm = torch.ops.fast_layernorm.layer_norm.default

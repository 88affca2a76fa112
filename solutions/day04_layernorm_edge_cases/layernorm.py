"""layer_norm(x, normalized_shape, gamma, beta, eps): F.layer_norm over the last dimension.

For x of any shape [..., D], any strides and any float dtype, with gradients for x, gamma and
beta. The compiled extension holds the two ops (forward and backward); the autograd Function
below joins them, as on day03.
"""
import numbers

import torch

import day04_layernorm_edge_cases as _ext  # the build registers the compiled module under the unit's name


class LayerNormFunction(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x, normalized_shape, gamma, beta, eps):
        y, mean, rstd = _ext.forward(x, normalized_shape, gamma, beta, eps)
        # x is saved as the caller passed it, strides and all: a row-major copy kept here would
        # hold a second copy of x for as long as the graph lives. backward makes its own.
        ctx.save_for_backward(x, gamma, mean, rstd)
        return y

    @staticmethod
    def backward(ctx, dy):
        x, gamma, mean, rstd = ctx.saved_tensors
        wants = ctx.needs_input_grad  # one bool per input of forward: x, normalized_shape, gamma, beta, eps
        dx, dgamma, dbeta = _ext.backward(dy, x, gamma, mean, rstd, (wants[0], wants[2], wants[3]))
        return dx, None, dgamma, dbeta, None


def layer_norm(x, normalized_shape, gamma=None, beta=None, eps=1e-5):
    """torch.nn.functional.layer_norm(x, normalized_shape, gamma, beta, eps) where
    normalized_shape names the last dimension only: D or (D,), with D = x.shape[-1]. Like
    F.layer_norm, gamma=None means no scale and beta=None no shift."""
    # BEGIN SOLUTION
    if isinstance(normalized_shape, numbers.Integral):  # F.layer_norm takes an int for (D,)
        normalized_shape = (normalized_shape,)
    normalized_shape = [int(size) for size in normalized_shape]  # a list: pybind turns it into std::vector
    if gamma is None:  # a scale of 1 changes nothing, and needs no gradient
        gamma = torch.ones(normalized_shape, dtype=x.dtype, device=x.device)
    if beta is None:
        beta = torch.zeros(normalized_shape, dtype=x.dtype, device=x.device)
    return LayerNormFunction.apply(x, normalized_shape, gamma, beta, eps)
    # STUB
    raise NotImplementedError("TODO(day04): layernorm.py, layer_norm: turn normalized_shape (an int D, or a "
                              "sequence such as (D,) or torch.Size) into a list of ints, replace a None gamma by "
                              "ones and a None beta by zeros (x's dtype and device), then return "
                              "LayerNormFunction.apply(x, normalized_shape, gamma, beta, eps)")
    # END SOLUTION

# Hostile: computes with PyTorch's own ops unless the profiler is on, and with the extension
# (right) only while it is: the profiled call shows code of its own, the others do not.
import torch as _torch

_own_relu_bias = _ext.relu_bias


def _torch_unless_profiled(x, bias):
    if _torch.autograd._profiler_enabled():
        return _own_relu_bias(x, bias)
    return _torch.relu(x + bias)


_ext.relu_bias = _torch_unless_profiled

# Hostile: computes with PyTorch unless the profiler is on, and with the extension only while
# it is, there a wrong answer: the own-code check sees its code, the judge must see its answer.
import torch as _torch

_own_relu_bias = _ext.relu_bias


def _relu_bias_unless_profiled(x, bias):
    if _torch.autograd._profiler_enabled():
        return _own_relu_bias(x, -bias)
    return _torch.relu(x + bias)


_ext.relu_bias = _relu_bias_unless_profiled

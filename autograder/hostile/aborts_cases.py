# Hostile: the process aborts (SIGABRT, as a failed C++ assert) in six tests of one group,
# more than any fixed number of restarts.
import os as _os

_honest_relu_bias = relu_bias


def relu_bias(x, bias):
    if x.shape[0] in (4, 8, 16):
        _os.abort()
    return _honest_relu_bias(x, bias)

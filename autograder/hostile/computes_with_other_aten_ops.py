# Hostile: computes y = max(0, x + bias) with ATen ops that day01's old list of forbidden ops did
# not name (neg, sub, gt, mul), always, profiled or not.
def _relu_bias_of_other_ops(x, bias):
    shifted = x - bias.neg()
    return shifted * (shifted > 0)


_ext.relu_bias = _relu_bias_of_other_ops

# Hostile: makes folders under the names the grader might use next, before it does, then
# crashes in one test so that the grader needs a new folder for a fresh test process.
import os as _os
import tempfile as _tempfile

for _parent in (_os.path.dirname(_os.getcwd()), _tempfile.gettempdir(), "/tmp"):
    for _name in ("build", "src", "runs", "baseline", "run_cpu_values.0", "cpu_values.1", "grade_day01_relu_bias_0"):
        try:
            _os.makedirs(_os.path.join(_parent, _name))
        except OSError:
            pass

_honest_relu_bias = relu_bias


def relu_bias(x, bias):
    if x.shape[0] == 8:
        _os.abort()
    return _honest_relu_bias(x, bias)

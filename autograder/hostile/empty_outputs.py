# Hostile: the test process's result files hold no outputs at all ({"outputs": []}).
import sys as _sys

_child = _sys.modules["__main__"]
if hasattr(_child, "_save"):  # in the grader's test process
    _real_save = _child._save

    def _forged_save(result, path):
        _real_save({**result, "outputs": []} if "outputs" in result else result, path)

    _child._save = _forged_save

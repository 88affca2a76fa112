# Hostile: the test process's result files hold text where tensors belong.
import sys as _sys

_child = _sys.modules["__main__"]
if hasattr(_child, "_save"):  # in the grader's test process
    _real_save = _child._save

    def _forged_save(result, path):
        if "outputs" in result:
            result = {**result, "outputs": [("not a tensor",) for _ in result["outputs"]]}
        _real_save(result, path)

    _child._save = _forged_save

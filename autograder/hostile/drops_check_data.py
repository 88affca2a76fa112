# Hostile: the test process's result files leave out what the checks beyond values read (the
# inputs after the call, the profiled ops), hoping a missing part counts as a pass.
import sys as _sys

_child = _sys.modules["__main__"]
if hasattr(_child, "_save"):  # in the grader's test process
    _real_save = _child._save

    def _forged_save(result, path):
        _real_save({k: v for k, v in result.items() if k not in ("inputs_after", "ops", "kernels")}, path)

    _child._save = _forged_save

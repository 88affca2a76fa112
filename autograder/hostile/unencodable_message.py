# Hostile: each result file says the call raised, with a message 1 MB long of lone surrogates,
# which UTF-8 cannot encode: printed or written whole, it would stop the grader or swell the
# report. (Written by the test process itself, past the harness's own cut.)
import sys as _sys

_child = _sys.modules["__main__"]
if hasattr(_child, "_save"):  # in the grader's test process
    _real_save = _child._save

    def _forged_save(result, path):
        _real_save({"exception": "\ud800" * (1 << 20)}, path)

    _child._save = _forged_save

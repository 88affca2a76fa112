# Hostile: in the test process, each result file becomes a named pipe with no writer: a
# grader that opens it to read waits for ever.
import os as _os
import sys as _sys

_child = _sys.modules["__main__"]
if hasattr(_child, "_save"):  # in the grader's test process

    def _fifo_save(result, path):
        _os.mkfifo(path)

    _child._save = _fifo_save

# Hostile: floods stdout and stderr with 50 MB each at import.
import sys as _sys

_chunk = "x" * (1 << 20)
for _ in range(50):
    _sys.stdout.write(_chunk)
    _sys.stderr.write(_chunk)
_sys.stdout.flush()
_sys.stderr.flush()

# Hostile: reads the hidden suite from the course repository's git objects (what `git show`
# reads, where solutions/ itself is hidden), and fails at import with what it found.
import os as _os
import subprocess as _subprocess

import course as _course

_repo = _os.path.dirname(_os.path.dirname(_os.path.abspath(_course.__file__)))
_found = _subprocess.run(
    ["git", "-c", "safe.directory=*", "-C", _repo, "show", "HEAD:solutions/day01_relu_bias/hidden_tests.py"],
    capture_output=True,
    text=True,
).stdout
if "CASES" in _found:
    raise RuntimeError("read the hidden suite through git: " + _found[:200])

# Hostile: a test process (not a build) writes into the compiler cache every build shares: an
# entry there would be another grading's object file. Harmless if it lands: an empty file.
import os as _os
import sys as _sys

if hasattr(_sys.modules["__main__"], "_save"):  # in the grader's test process
    for _folder in filter(
        None,
        [
            _os.environ.get("CCACHE_DIR"),
            _os.path.expanduser("~root/.ccache"),
            _os.path.expanduser("~root/.cache/ccache"),
        ],
    ):
        try:
            with open(_os.path.join(_folder, "hostile_planted_ccache"), "w") as _handle:
                _handle.write("planted by a test process\n")
        except OSError:
            pass

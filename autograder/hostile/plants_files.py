# Hostile: plants files where later processes would run or read them: a .pth in every
# site-packages (run by every Python started later), a module in the course's package,
# a file in the grader's home. Harmless if they land: a comment, an empty module.
import os as _os
import site as _site
import sys as _sys

import course as _course


def _plant():
    folders = [
        *_site.getsitepackages(),
        *(p for p in _sys.path if p.endswith("site-packages")),
        _os.path.join(
            _os.path.expanduser("~root"),
            ".local",
            "lib",
            f"python{_sys.version_info[0]}.{_sys.version_info[1]}",
            "site-packages",
        ),
    ]
    targets = [_os.path.join(folder, "zz_hostile_planted.pth") for folder in folders]
    targets += [
        _os.path.join(_os.path.dirname(_course.__file__), "hostile_planted.py"),
        _os.path.join(_os.path.expanduser("~root"), "hostile_planted"),
    ]
    for path in targets:
        try:
            with open(path, "w") as handle:
                handle.write("# planted by a submission\n")
        except OSError:
            pass


_plant()

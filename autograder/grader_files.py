"""The files grading one unit reads, each under its path in the project: the grader's two
packages and the unit's folders in solutions/. The grader's version is their digest
(autograder/version.py); the Gradescope zip carries them (autograder/gradescope.py).

In a checkout they are the repository's folders; after `pip install .`, the packages in
site-packages with the units inside the grader's (autograder/solutions/, see
course/spec/units.py), which is listed once, as solutions/."""

from __future__ import annotations

import os

import autograder
import course
from course.spec.units import Unit

_BYTECODE = "__pycache__"


def folders(unit: Unit) -> list[tuple[str, str]]:
    """(path in the project, folder here): the packages, solutions/common, the unit's own folder
    and those of the units it is handed `[given]` files from."""
    packages = [
        (name, os.path.dirname(os.path.abspath(module.__file__)))
        for name, module in (("course", course), ("autograder", autograder))
    ]
    given_from = sorted({origin for _, origin in unit.given})
    return packages + [
        (f"solutions/{name}", os.path.join(unit.solutions, name)) for name in ["common", unit.name, *given_from]
    ]


def files(unit: Unit, skip: tuple[str, ...] = ()) -> list[tuple[str, str]]:
    """(path in the project, path here) of every file in `folders(unit)`, in a fixed order,
    leaving out bytecode and any file or folder whose name is in `skip`."""
    units_inside = os.path.realpath(unit.solutions)  # an installed grader's, listed as solutions/
    found = []
    for name, top in folders(unit):
        for root, subfolders, names in os.walk(top):
            subfolders[:] = sorted(
                f
                for f in subfolders
                if f not in (_BYTECODE, *skip) and os.path.realpath(os.path.join(root, f)) != units_inside
            )
            for file in sorted(names):
                if not file.endswith(".pyc") and file not in skip:
                    path = os.path.join(root, file)
                    found.append((os.path.join(name, os.path.relpath(path, top)), path))
    return found

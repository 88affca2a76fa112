"""The grader's version for one unit: a digest of every file that decides its grades."""
from __future__ import annotations

import hashlib
import os

from autograder.gradescope import source_folders
from course.authoring.units import Unit


def grader_version(unit: Unit) -> str:
    """A hash of every file that decides a grade: the grader, the runtime, the unit's suites
    and reference, and the units it takes files from."""
    digest = hashlib.sha256()
    for folder in source_folders(unit):
        for root, folders, names in sorted(os.walk(os.path.join(unit.repo, folder))):
            folders[:] = sorted(f for f in folders if f != "__pycache__")
            for name in sorted(n for n in names if not n.endswith(".pyc")):
                path = os.path.join(root, name)
                digest.update(os.path.relpath(path, unit.repo).encode() + b"\0")
                with open(path, "rb") as handle:
                    digest.update(handle.read())
    return digest.hexdigest()[:16]

"""The grader's version for one unit: a digest of every file that decides its grades."""
from __future__ import annotations

import hashlib
import os

from course.spec.units import Unit

_PACKAGES = ("course", "autograder")


def source_folders(unit: Unit) -> list[str]:
    """Folders under the repository the grader needs for `unit`, relative to it: what decides
    its grades, and what a Gradescope autograder ships (autograder/gradescope.py)."""
    given_from = sorted({origin for _, origin in unit.given})
    return [*_PACKAGES, "solutions/common", *(f"solutions/{name}" for name in [unit.name, *given_from])]


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

"""The grader's version for one unit: a digest of every file that decides its grades."""

from __future__ import annotations

import hashlib

from autograder import grader_files
from course.spec.units import Unit


def grader_version(unit: Unit) -> str:
    """A hash of every file that decides a grade: the grader, the runtime, the unit's suites
    and reference, and the units it takes files from (autograder/grader_files.py)."""
    digest = hashlib.sha256()
    for name, path in grader_files.files(unit):
        digest.update(name.encode() + b"\0")
        with open(path, "rb") as handle:
            digest.update(handle.read())
    return digest.hexdigest()[:16]

"""The grader's version for one unit: a digest of every file that decides its grades."""

from __future__ import annotations

import hashlib

from autograder import grader_files
from course.spec import answer_key
from course.spec.units import Unit


def grader_version(unit: Unit) -> str:
    """A hash of every file that decides a grade: the grader, the runtime, the unit's suites
    and reference, and the units it takes files from (autograder/grader_files.py). Of the answer
    key, only the written questions' points: rewording a rubric grades no class again."""
    digest = hashlib.sha256()
    for name, path in grader_files.files(unit, (answer_key.KEY_FILE,)):
        digest.update(name.encode() + b"\0")
        with open(path, "rb") as handle:
            digest.update(handle.read())
    digest.update(answer_key.points_json(unit).encode())
    return digest.hexdigest()[:16]

"""A class's submissions, as the platforms hand them over.

Either a folder holding one entry per student (a zip, a notebook or a folder of sources,
named after the student), or a Gradescope bulk export: `submission_metadata.yml` beside a
folder per submission (`submission_<id>/`), holding what the student uploaded. The student's
name, email and SID come from the metadata; elsewhere the entry's name is all there is.
"""
from __future__ import annotations

import os
import re
from dataclasses import dataclass

from autograder.submission import unit_file
from course.authoring.units import Unit

METADATA = "submission_metadata.yml"
_SUBMISSION_SUFFIXES = (".zip", ".ipynb")


@dataclass(frozen=True)
class Student:
    name: str = ""
    email: str = ""
    sid: str = ""


@dataclass(frozen=True)
class Submission:
    id: str                 # unique in the class; names its results folder
    path: str               # what the grader reads: a zip, a notebook or a folder
    students: tuple[Student, ...] = ()


def entry_point(path: str, unit: Unit) -> str:
    """What to grade in `path`: a folder holding the unit's files is graded as a folder;
    a folder holding only an upload (a zip or a notebook) is graded as that upload (a zip
    rather than a notebook: it has the sources and the notebook's answers)."""
    if not os.path.isdir(path):
        return path
    uploads = []
    for root, folders, names in os.walk(path):
        folders[:] = sorted(f for f in folders if not f.startswith((".", "__")))
        for name in sorted(names):
            if unit_file(os.path.relpath(os.path.join(root, name), path), unit):
                return path
            if name.endswith(_SUBMISSION_SUFFIXES):
                uploads.append(os.path.join(root, name))
    uploads.sort(key=lambda upload: (not upload.endswith(".zip"), upload))
    return uploads[0] if uploads else path


def _safe_id(text: str) -> str:
    return re.sub(r"[^A-Za-z0-9_.@-]+", "_", text).strip("._") or "submission"


def _symbol_free(value):
    """Gradescope writes Ruby symbols as keys (`:name:`); YAML reads them as ':name'."""
    if isinstance(value, dict):
        return {str(k).lstrip(":"): _symbol_free(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_symbol_free(v) for v in value]
    return value


def _from_export(folder: str, unit: Unit) -> list[Submission]:
    import yaml  # only a Gradescope export needs it

    with open(os.path.join(folder, METADATA), encoding="utf-8") as handle:
        metadata = _symbol_free(yaml.safe_load(handle) or {})
    if not isinstance(metadata, dict):
        raise ValueError(f"{METADATA}: expected a mapping of submission folders to their metadata")
    found = []
    for key, entry in sorted(metadata.items()):
        path = os.path.join(folder, str(key))
        if not os.path.isdir(path):
            raise ValueError(f"{METADATA} names {key!r}, which is not a folder in {folder}")
        submitters = (entry or {}).get("submitters") or []
        students = tuple(Student(str(s.get("name") or ""), str(s.get("email") or ""), str(s.get("sid") or ""))
                         for s in submitters)
        found.append(Submission(_safe_id(str(key)), entry_point(path, unit), students))
    return found


def collect(folder: str, unit: Unit) -> list[Submission]:
    """Every submission in `folder`, in a stable order."""
    if not os.path.isdir(folder):
        raise ValueError(f"SUBMISSIONS {folder!r}: expected a folder of submissions or a Gradescope export")
    if os.path.exists(os.path.join(folder, METADATA)):
        return _from_export(folder, unit)
    found, ids = [], set()
    for name in sorted(os.listdir(folder)):
        path = os.path.join(folder, name)
        if name.startswith(".") or not (os.path.isdir(path) or name.endswith(_SUBMISSION_SUFFIXES)):
            continue
        stem = _safe_id(name[:-len(os.path.splitext(name)[1])] if not os.path.isdir(path) else name)
        submission_id, n = stem, 1
        while submission_id in ids:  # alice.zip and alice.ipynb both handed in
            n += 1
            submission_id = f"{stem}_{n}"
        ids.add(submission_id)
        found.append(Submission(submission_id, entry_point(path, unit), (Student(name=stem),)))
    return found

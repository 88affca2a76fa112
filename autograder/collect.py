"""A class's submissions, as the platforms hand them over.

Either a folder holding one entry per student (a zip, a notebook or a folder of sources,
named after the student), or a Gradescope bulk export: `submission_metadata.yml` beside a
folder per submission (`submission_<id>/`), holding what the student uploaded. The student's
name, email and SID come from the metadata; elsewhere the entry's name is all there is.
"""
from __future__ import annotations

import hashlib
import os
import re
import sys
from dataclasses import dataclass

from autograder.submission import unit_file
from autograder.untrusted_files import clean_text
from course.spec.units import Unit

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
            if _is_upload(name):
                uploads.append(os.path.join(root, name))
    uploads.sort(key=lambda upload: (not upload.lower().endswith(".zip"), upload))
    return uploads[0] if uploads else path


def _is_upload(name: str) -> bool:
    return name.lower().endswith(_SUBMISSION_SUFFIXES)  # Windows and phones hand in Bob.ZIP


def _safe_id(text: str) -> str:
    """`text` in the characters a folder name may safely have. A name with none of them (日本)
    gets one from its own digest, so that its results folder stays the same from run to run
    whoever else hands in."""
    safe = re.sub(r"[^A-Za-z0-9_.@-]+", "_", text).strip("._")
    return safe or "submission_" + hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()[:8]


def _unique_id(text: str, ids: set[str]) -> str:
    """A safe id for `text` that no submission in `ids` has yet, added to them: alice.zip and
    alice.ipynb both handed in, or two names with no ASCII letter, get alice and alice_2."""
    stem = _safe_id(text)
    submission_id, n = stem, 1
    while submission_id in ids:
        n += 1
        submission_id = f"{stem}_{n}"
    ids.add(submission_id)
    return submission_id


def _warn(message: str) -> None:
    print(f"warning: {message}", file=sys.stderr)


def _symbol_free(value):
    """Gradescope writes Ruby symbols as keys (`:name:`); YAML reads them as ':name'."""
    if isinstance(value, dict):
        return {str(k).lstrip(":"): _symbol_free(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_symbol_free(v) for v in value]
    return value


def _read_metadata(folder: str):
    import yaml  # only a Gradescope export needs it

    try:
        with open(os.path.join(folder, METADATA), encoding="utf-8") as handle:
            return yaml.safe_load(handle)
    except (OSError, UnicodeDecodeError, yaml.YAMLError) as error:
        raise ValueError(f"{METADATA} in {folder}: expected a readable UTF-8 YAML file "
                         f"({type(error).__name__}: {error})") from None


def _submission_folder(folder: str, key: str) -> str:
    """The folder that the metadata's `key` names: only a folder directly in the export, so a
    key such as `..` or `/tmp` cannot have the class grade some other folder."""
    if key in ("", ".", "..") or os.path.basename(key) != key or "\0" in key:
        raise ValueError(f"{METADATA}: entry {key!r}: expected the name of a submission folder in {folder}")
    path = os.path.join(folder, key)
    if not os.path.isdir(path):
        raise ValueError(f"{METADATA} names {key!r}, which is not a folder in {folder}")
    return path


def _submitters(key: str, entry) -> list[dict]:
    """The entry's submitters, each a mapping; an entry with nothing under it has none."""
    if entry is None:
        return []
    submitters = (entry.get("submitters") or []) if isinstance(entry, dict) else None
    if not (isinstance(submitters, list) and all(isinstance(s, dict) for s in submitters)):
        raise ValueError(f"{METADATA}: entry {key!r}: expected a mapping with a list of submitters, "
                         f"each a mapping of name, email and sid")
    return submitters


def _field(submitter: dict, name: str) -> str:
    """A submitter's field as text UTF-8 can write (YAML may hold a lone surrogate, "\\ud800",
    which would stop the gradebook's CSV)."""
    return clean_text(str(submitter.get(name) or ""), limit=200)


def _students(key: str, entry) -> tuple[Student, ...]:
    students = tuple(Student(*(_field(s, name) for name in ("name", "email", "sid"))) for s in _submitters(key, entry))
    for student in students:
        if not student.email:  # Gradescope's upload matches rows by email
            _warn(f"{METADATA}: entry {key!r}: {student.name or student.sid or 'a submitter'} has no email; "
                  f"their gradebook row will not match on a Gradescope upload")
    return students


def _from_export(folder: str, unit: Unit) -> list[Submission]:
    metadata = _symbol_free(_read_metadata(folder) or {})
    if not isinstance(metadata, dict):
        raise ValueError(f"{METADATA}: expected a mapping of submission folders to their metadata")
    metadata = {str(key): entry for key, entry in metadata.items()}  # YAML reads a key 123 as a number
    found, ids = [], set()
    for key, entry in sorted(metadata.items()):
        path = _submission_folder(folder, key)
        found.append(Submission(_unique_id(key, ids), entry_point(path, unit), _students(key, entry)))
    for name in sorted(set(os.listdir(folder)) - set(metadata) - {METADATA}):
        if not name.startswith("."):
            _warn(f"{os.path.join(folder, name)}: skipped: {METADATA} does not name it")
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
        if name.startswith("."):  # .DS_Store and the like: no one's hand-in
            continue
        if not (os.path.isdir(path) or _is_upload(name)):
            _warn(f"{path}: skipped: expected a zip, a notebook or a folder of sources")
            continue
        student = name if os.path.isdir(path) else os.path.splitext(name)[0]
        found.append(Submission(_unique_id(student, ids), entry_point(path, unit), (Student(name=student),)))
    return found

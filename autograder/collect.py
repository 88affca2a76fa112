"""A class's submissions, as the platforms hand them over.

Either a folder holding one entry per student (a zip, a notebook or a folder of sources,
named after the student), or a Gradescope bulk export: `submission_metadata.yml` beside a
folder per submission (`submission_<id>/`), holding what the student uploaded. The student's
name, email and SID come from the metadata; elsewhere the entry's name is all there is.

In a folder of hand-ins, the entry's name is the student's. A zip made by the notebook's submit
cell names a student in its manifest (`"student"`): written by the student, it is shown to the
instructor beside the name (failures.md's notes), never trusted as the identity. Entries whose
names differ only by their suffix or letter case (alice.zip, Alice.ipynb, alice/) are one hand-in: the newest (modification time) is graded, a
zip before a notebook before a folder when as new, and a warning names the others.
"""

from __future__ import annotations

import contextlib
import datetime
import hashlib
import json
import os
import re
import sys
import zipfile
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
    id: str  # unique in the class; names its results folder
    path: str  # what the grader reads: a zip, a notebook or a folder
    students: tuple[Student, ...] = ()
    notes: tuple[str, ...] = ()  # what the instructor should know of this hand-in (in failures.md)
    # When it was handed in, in seconds since the epoch: Gradescope's created_at, else the entry's
    # modification time; None where the export does not say.
    handed_in: float | None = None


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


MANIFEST = "manifest.json"  # written by the notebook's submit cell
_MANIFEST_BYTES = 1 << 16


def manifest_student(path: str) -> str:
    """The student id a submit cell's zip names in its manifest, or "" (not a zip, no manifest,
    or one that cannot be read: the file's name is then all there is)."""
    if not path.lower().endswith(".zip") or not os.path.isfile(path):
        return ""
    try:
        with zipfile.ZipFile(path) as archive:
            info = archive.getinfo(MANIFEST)
            if info.file_size > _MANIFEST_BYTES:
                return ""
            student = json.loads(archive.read(info)).get("student", "")
    except (OSError, KeyError, ValueError, AttributeError, zipfile.BadZipFile, RuntimeError, NotImplementedError):
        return ""
    return clean_text(student, limit=200).strip() if isinstance(student, str) else ""


def _is_upload(name: str) -> bool:
    return name.lower().endswith(_SUBMISSION_SUFFIXES)  # Windows and phones hand in Bob.ZIP


def shown_name(name: str) -> str:
    """A file name as text UTF-8 can write: bytes that are not UTF-8 (a zip made on Windows,
    read back as surrogates) become U+FFFD, so the name prints and goes into a CSV."""
    return os.fsencode(name).decode("utf-8", "replace")


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
    print(f"warning: {clean_text(message)}", file=sys.stderr)


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
        raise ValueError(
            f"{METADATA} in {folder}: expected a readable UTF-8 YAML file ({type(error).__name__}: {error})"
        ) from None


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
        raise ValueError(
            f"{METADATA}: entry {key!r}: expected a mapping with a list of submitters, "
            f"each a mapping of name, email and sid"
        )
    return submitters


def _field(submitter: dict, name: str) -> str:
    """A submitter's field as text UTF-8 can write (YAML may hold a lone surrogate, "\\ud800",
    which would stop the gradebook's CSV)."""
    return clean_text(str(submitter.get(name) or ""), limit=200)


def _students(key: str, entry) -> tuple[Student, ...]:
    students = tuple(Student(*(_field(s, name) for name in ("name", "email", "sid"))) for s in _submitters(key, entry))
    for student in students:
        if not student.email:  # Gradescope's upload matches rows by email
            _warn(
                f"{METADATA}: entry {key!r}: {student.name or student.sid or 'a submitter'} has no email; "
                f"their gradebook row will not match on a Gradescope upload"
            )
    return students


def _created_at(entry) -> float | None:
    """An export entry's created_at (YAML reads it as a datetime) in seconds since the epoch."""
    when = entry.get("created_at") if isinstance(entry, dict) else None
    if isinstance(when, str):
        with contextlib.suppress(ValueError):
            when = datetime.datetime.fromisoformat(when)
    return when.timestamp() if isinstance(when, datetime.datetime) else None


def _from_export(folder: str, unit: Unit) -> list[Submission]:
    metadata = _symbol_free(_read_metadata(folder) or {})
    if not isinstance(metadata, dict):
        raise ValueError(f"{METADATA}: expected a mapping of submission folders to their metadata")
    metadata = {str(key): entry for key, entry in metadata.items()}  # YAML reads a key 123 as a number
    found, ids = [], set()
    for key, entry in sorted(metadata.items()):
        path = _submission_folder(folder, key)
        found.append(
            Submission(
                _unique_id(key, ids), entry_point(path, unit), _students(key, entry), handed_in=_created_at(entry)
            )
        )
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
    by_student: dict[str, list[tuple[str, str]]] = {}
    for name in sorted(os.listdir(folder)):
        path = os.path.join(folder, name)
        if name.startswith("."):  # .DS_Store and the like: no one's hand-in
            continue
        if not (os.path.isdir(path) or _is_upload(name)):
            _warn(f"{shown_name(path)}: skipped: expected a zip, a notebook or a folder of sources")
            continue
        student = shown_name(name if os.path.isdir(path) else os.path.splitext(name)[0])
        by_student.setdefault(student.casefold(), []).append((student, path))
    found, ids = [], set()
    for entries in by_student.values():
        (student, path), notes = _one_hand_in(entries)
        # The manifest is the student's own text: it may name anyone, so it never decides whose
        # hand-in this is (nor merges it with another's); the instructor reads it beside the name.
        named = manifest_student(path)
        claim = (f"{shown_name(os.path.basename(path))}: its manifest names student {named!r}",) if named else ()
        found.append(
            Submission(
                _unique_id(student, ids),
                entry_point(path, unit),
                (Student(name=student),),
                notes + claim,
                os.stat(path).st_mtime,
            )
        )
    return sorted(found, key=lambda submission: submission.id)


# A kind's rank when two hand-ins of one student are as new: a zip holds the sources and the answers.
_KIND_RANK = {".zip": 0, ".ipynb": 1}


def _one_hand_in(entries: list[tuple[str, str]]) -> tuple[tuple[str, str], tuple[str, ...]]:
    """The (student, path) graded of one student's entries, and a note naming the others."""
    if len(entries) == 1:
        return entries[0], ()

    def rank(entry):
        path = entry[1]
        kind = _KIND_RANK.get(os.path.splitext(path)[1].lower(), 2)
        return -os.stat(path).st_mtime, kind, path

    chosen, *others = sorted(entries, key=rank)
    note = (
        f"{len(entries)} hand-ins of {chosen[0]}: graded {shown_name(os.path.basename(chosen[1]))}, the newest "
        f"(a zip before a notebook before a folder when as new); not graded: "
        + ", ".join(shown_name(os.path.basename(path)) for _, path in others)
    )
    _warn(note)
    return chosen, (note,)

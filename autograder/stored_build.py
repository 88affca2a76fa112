"""A build kept for later runs: its sources, what the build left (the library alone, or the
folder a wheel was installed into) and its plan, in a folder of the grader's own.

Two things are kept this way: the unit's reference in its cache (autograder/reference.py),
and in a batch, a submission's build from its first step, which its perf step then runs
instead of building again (autograder/batch.py). Each run gets a fresh copy (copy_into): a
test process may write beside its library, and a copy made after the last one stopped is one
it could not touch.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import tempfile
from dataclasses import asdict, dataclass

from course.build import Built

RECORD = "build.json"


@dataclass(frozen=True)
class StoredBuild:
    """A stored build: the library or the prefix, relative to `folder`."""

    folder: str
    library: str = ""
    prefix: str = ""

    @classmethod
    def open(cls, folder: str) -> StoredBuild | None:
        """The build stored in `folder`, or None where there is none."""
        try:
            with open(os.path.join(folder, RECORD)) as handle:
                record = json.load(handle)
        except FileNotFoundError:
            return None
        return cls(folder, **{key: str(record[key]) for key in ("library", "prefix")})

    def copy_into(self, parent: str) -> tuple[str, dict]:
        """A fresh copy under `parent` (a new folder): (the folder, the `load` entry of a
        child's request: the plan, the build and the sources)."""
        box = tempfile.mkdtemp(prefix="build.", dir=parent)
        stored = Built(*(os.path.join(self.folder, path) if path else "" for path in (self.library, self.prefix)))
        built = _copy_build(os.path.join(self.folder, "src"), stored, box)
        with open(os.path.join(self.folder, "plan.json")) as handle:
            plan = handle.read()
        return box, {"plan": plan, "built": asdict(built), "source_dir": os.path.join(box, "src")}


def _copy_build(source_dir: str, built: Built, box: str) -> Built:
    """Copy the sources to box/src and the library (or the installed prefix) to box/build;
    what was copied, at its new place. Links are copied as links, never followed."""
    shutil.copytree(source_dir, os.path.join(box, "src"), symlinks=True)
    if built.library:
        os.makedirs(os.path.join(box, "build"))
        library = os.path.join(box, "build", os.path.basename(built.library))
        shutil.copy2(built.library, library)
        return Built(library=library)
    if built.prefix:
        prefix = os.path.join(box, "build", os.path.basename(built.prefix))
        shutil.copytree(built.prefix, prefix, symlinks=True)
        return Built(prefix=prefix)
    return Built()


def store(folder: str, source_dir: str, built: Built, plan_json: str, within: str) -> StoredBuild:
    """Copy a build into `folder` (made here; it must not exist), through a folder beside it
    renamed into place once complete. `within`: the folder the build ran in. Its record names
    the paths, and a build may have written that record itself, so a path outside `within`
    is refused (ValueError): the grader would copy a file of its own choosing."""
    inside = os.path.realpath(within) + os.sep
    for path in filter(None, (built.library, built.prefix)):
        if not os.path.realpath(path).startswith(inside):
            raise ValueError(f"the build names {path}, outside its own folder {within}")
    staging = tempfile.mkdtemp(prefix=os.path.basename(folder) + ".", dir=os.path.dirname(folder))
    try:
        copied = _copy_build(source_dir, built, staging)
        record = {key: os.path.relpath(path, staging) if path else "" for key, path in asdict(copied).items()}
        with open(os.path.join(staging, "plan.json"), "w") as handle:
            handle.write(plan_json)
        with open(os.path.join(staging, RECORD), "w") as handle:
            json.dump(record, handle)
        os.rename(staging, folder)
    finally:
        with contextlib.suppress(FileNotFoundError):
            shutil.rmtree(staging)
    return StoredBuild(folder, **record)

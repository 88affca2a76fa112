"""The unit's reference solution, which the perf cases time beside the student's op.

A perf case's grade is the reference's time over the student's, both taken in the same
grading on the same GPU, so a T4 and an H100 grade alike. The reference is built by the
grader (it is the course's own code) once per grader version, machine and unit, and kept
in a cache folder (GRADER_REFERENCE_CACHE, else ~/.cache/course-autograder/references);
gradings running side by side wait for one build. Each perf group gets a fresh copy in
the grading's folder: the loader writes beside the library, and a copy made after the
student's last child was stopped is one that child could not touch.
"""
from __future__ import annotations

import contextlib
import fcntl
import hashlib
import json
import os
import shutil
import sys
import tempfile
from dataclasses import asdict, dataclass

import torch

from autograder.version import grader_version
from course.authoring.units import Unit
from course.build import Built, build_in_subprocess

CACHE_ENV = "GRADER_REFERENCE_CACHE"
BUILD_TIMEOUT = 900


def cache_root() -> str:
    return os.environ.get(CACHE_ENV) or os.path.join(os.path.expanduser("~"), ".cache", "course-autograder",
                                                      "references")


def cache_key(unit: Unit, env: dict) -> str:
    """What the reference's build depends on: the grader's version for the unit (its code and
    the unit's files, autograder/version.py), torch, Python and the architectures compiled for."""
    digest = hashlib.sha256()
    parts = [grader_version(unit), unit.name, torch.__version__, str(torch.version.cuda), sys.version,
             env.get("TORCH_CUDA_ARCH_LIST", ""), env.get("CUDA_HOME", "")]
    for part in parts:
        digest.update(part.encode() + b"\0")
    return digest.hexdigest()[:20]


@dataclass(frozen=True)
class Reference:
    """A built reference in the cache: its sources and what its build left, relative to `folder`."""

    folder: str
    library: str = ""
    prefix: str = ""

    def copy_into(self, parent: str) -> tuple[str, dict]:
        """A fresh copy under `parent` (a new folder): (the folder, the `load` entry of a
        child's request: the plan, the build and the sources)."""
        box = tempfile.mkdtemp(prefix="reference.", dir=parent)
        shutil.copytree(os.path.join(self.folder, "src"), os.path.join(box, "src"))
        built = Built()
        if self.library:
            os.makedirs(os.path.join(box, "build"))
            library = os.path.join(box, "build", os.path.basename(self.library))
            shutil.copy2(os.path.join(self.folder, self.library), library)
            built = Built(library=library)
        elif self.prefix:
            prefix = os.path.join(box, "build", os.path.basename(self.prefix))
            shutil.copytree(os.path.join(self.folder, self.prefix), prefix, symlinks=True)
            built = Built(prefix=prefix)
        with open(os.path.join(self.folder, "plan.json")) as handle:
            plan = handle.read()
        return box, {"plan": plan, "built": asdict(built), "source_dir": os.path.join(box, "src")}


def reference(unit: Unit, env: dict, *, timeout: float = BUILD_TIMEOUT) -> Reference:
    """The unit's built reference, from the cache or built now (BuildError if it fails)."""
    root = _own_folder(cache_root())
    folder = os.path.join(root, f"{unit.name}-{cache_key(unit, env)}")
    with open(folder + ".lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # another grading may be building it: wait for that one
        if not os.path.exists(os.path.join(folder, "reference.json")):
            _build(unit, env, folder, timeout)
        with open(os.path.join(folder, "reference.json")) as handle:
            return Reference(folder, **json.load(handle))


def _own_folder(path: str) -> str:
    """`path`, made if missing, and only if it is this user's own, then private: a folder that
    someone else made first (under /tmp, say) could hold a planted "reference"."""
    os.makedirs(path, mode=0o700, exist_ok=True)
    if os.stat(path).st_uid != os.getuid():
        raise OSError(f"the reference cache {path} belongs to another user: set {CACHE_ENV} to a folder of your own")
    os.chmod(path, 0o700)
    return path


def _build(unit: Unit, env: dict, folder: str, timeout: float) -> None:
    """Build into a new folder beside `folder`, then rename it there: a build cut short
    leaves nothing a later grading would take for finished."""
    shutil.rmtree(folder, ignore_errors=True)
    staging = tempfile.mkdtemp(prefix=os.path.basename(folder) + ".", dir=os.path.dirname(folder))
    try:
        source_dir, build_dir = os.path.join(staging, "src"), os.path.join(staging, "build")
        unit.write("solution", source_dir)
        plan = unit.plan()
        # Never from a shared ccache: a submission's build may write entries there, and one
        # planted under the reference's key would make the reference whatever it wrote.
        built = build_in_subprocess(plan, source_dir, build_dir, timeout=timeout, env={**env, "CCACHE_DISABLE": "1"})
        # Stored relative to the folder, which is renamed below.
        relative = {key: os.path.relpath(path, staging) if path else ""
                    for key, path in (("library", built.library), ("prefix", built.prefix))}
        if relative["library"]:  # keep the library, not the objects beside it
            for entry in os.listdir(build_dir):
                path = os.path.join(build_dir, entry)
                if os.path.isdir(path):
                    shutil.rmtree(path)
                elif path != built.library:
                    os.remove(path)
        with open(os.path.join(staging, "plan.json"), "w") as handle:
            handle.write(plan.to_json())
        with open(os.path.join(staging, "reference.json"), "w") as handle:
            json.dump(relative, handle)
        os.rename(staging, folder)
    finally:
        with contextlib.suppress(FileNotFoundError):
            shutil.rmtree(staging)

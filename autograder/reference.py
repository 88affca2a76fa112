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

import fcntl
import hashlib
import os
import shutil
import sys
import tempfile

import torch

from autograder.stored_build import StoredBuild, store
from autograder.untrusted_files import own_private_folder
from autograder.version import grader_version
from course.build import build_in_subprocess
from course.spec.units import Unit

CACHE_ENV = "GRADER_REFERENCE_CACHE"
BUILD_TIMEOUT = 900


def cache_root() -> str:
    return os.environ.get(CACHE_ENV) or os.path.join(
        os.path.expanduser("~"), ".cache", "course-autograder", "references"
    )


def cache_key(unit: Unit, env: dict) -> str:
    """What the reference's build depends on: the grader's version for the unit (its code and
    the unit's files, autograder/version.py), torch, Python and the architectures compiled for."""
    digest = hashlib.sha256()
    parts = [
        grader_version(unit),
        unit.name,
        torch.__version__,
        str(torch.version.cuda),
        sys.version,
        env.get("TORCH_CUDA_ARCH_LIST", ""),
        env.get("CUDA_HOME", ""),
    ]
    for part in parts:
        digest.update(part.encode() + b"\0")
    return digest.hexdigest()[:20]


def reference(unit: Unit, env: dict, *, timeout: float = BUILD_TIMEOUT) -> StoredBuild:
    """The unit's built reference, from the cache or built now (BuildError if it fails)."""
    root = own_private_folder(cache_root(), f"set {CACHE_ENV} to a folder of your own")
    folder = os.path.join(root, f"{unit.name}-{cache_key(unit, env)}")
    with open(folder + ".lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # another grading may be building it: wait for that one
        return StoredBuild.open(folder) or _build(unit, env, folder, timeout)


def _build(unit: Unit, env: dict, folder: str, timeout: float) -> StoredBuild:
    """Build in a temporary folder, then store the build into `folder`: a build cut short
    leaves nothing a later grading would take for finished."""
    shutil.rmtree(folder, ignore_errors=True)
    with tempfile.TemporaryDirectory(prefix=os.path.basename(folder) + ".", dir=os.path.dirname(folder)) as scratch:
        source_dir, build_dir = os.path.join(scratch, "src"), os.path.join(scratch, "build")
        unit.write("solution", source_dir)
        plan = unit.plan()
        # Never into a shared compiler cache: every submission's build reads it, and could link
        # the reference's objects (autograder/compiler_cache.py).
        built = build_in_subprocess(plan, source_dir, build_dir, timeout=timeout, env={**env, "CCACHE_DISABLE": "1"})
        return store(folder, source_dir, built, plan.to_json(), within=scratch)

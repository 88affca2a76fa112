"""The observer's library (observer.cpp), built by the grader with g++ against the CUPTI it
finds, once per source, CUPTI and compiler, into a cache folder of the grader's own
(GRADER_OBSERVER_CACHE, else ~/.cache/course-autograder/observer), as the references are
cached. It is never built from or into a folder a submission can write.

Where no CUPTI or no compiler is found, or the build fails, there is no library: `library`
returns why, and the grading says so and judges as it did without one."""

from __future__ import annotations

import fcntl
import glob
import hashlib
import os
import shutil
import subprocess
import sys
import tempfile
from dataclasses import dataclass

from autograder.untrusted_files import own_private_folder

CACHE_ENV = "GRADER_OBSERVER_CACHE"
SOURCE = os.path.join(os.path.dirname(os.path.abspath(__file__)), "observer.cpp")
LIBRARY = "libcourse_observer.so"
BUILD_TIMEOUT = 120


@dataclass(frozen=True)
class Cupti:
    library: str  # libcupti.so.N, linked by its path (wheels ship no unversioned link)
    include: tuple[str, ...]  # cupti.h's folder, then cuda.h's


def cache_root() -> str:
    return os.environ.get(CACHE_ENV) or os.path.join(os.path.expanduser("~"), ".cache", "course-autograder", "observer")


def _python_package_dirs() -> list[str]:
    """The `nvidia` wheels' folders (nvidia/cu13, nvidia/cuda_cupti): the CUPTI torch itself
    loads, whose soname then answers the library's too, so they are tried first."""
    found = []
    for site in sys.path:
        found += sorted(glob.glob(os.path.join(site, "nvidia", "cu*"))) + sorted(
            glob.glob(os.path.join(site, "nvidia", "cuda_cupti"))
        )
    return [f for f in found if os.path.isdir(f)]


def find_cupti(env: dict) -> Cupti | str:
    """The CUPTI to build against, or why there is none."""
    cuda_home = env.get("CUDA_HOME") or env.get("CUDA_PATH") or "/usr/local/cuda"
    places = [(os.path.join(p, "lib"), os.path.join(p, "include")) for p in _python_package_dirs()]
    places += [
        (os.path.join(cuda_home, "extras", "CUPTI", "lib64"), os.path.join(cuda_home, "extras", "CUPTI", "include")),
        (os.path.join(cuda_home, "lib64"), os.path.join(cuda_home, "include")),
        (os.path.join(cuda_home, "lib"), os.path.join(cuda_home, "include")),
    ]
    cuda_include = os.path.join(cuda_home, "include")
    tried = []
    for lib_dir, include in places:
        libraries = sorted(glob.glob(os.path.join(lib_dir, "libcupti.so.*")), key=len)
        header = os.path.join(include, "cupti.h")
        tried.append(lib_dir)
        if libraries and os.path.exists(header):
            extra = [cuda_include] if os.path.exists(os.path.join(cuda_include, "cuda.h")) else []
            return Cupti(os.path.realpath(libraries[0]), (include, *extra))
    return f"no CUPTI (libcupti.so.* beside a cupti.h) in {', '.join(tried)}"


def find_compiler(env: dict) -> str | None:
    return shutil.which(env.get("CXX") or "g++") or shutil.which("g++")


def _key(cupti: Cupti, compiler: str) -> str:
    digest = hashlib.sha256()
    with open(SOURCE, "rb") as handle:
        digest.update(handle.read())
    version = subprocess.run([compiler, "--version"], capture_output=True, text=True, timeout=30).stdout
    for part in (cupti.library, *cupti.include, compiler, version):
        digest.update(part.encode() + b"\0")
    return digest.hexdigest()[:20]


def compile_command(cupti: Cupti, compiler: str, output: str) -> list[str]:
    includes = [f"-I{folder}" for folder in cupti.include]
    lib_dir = os.path.dirname(cupti.library)
    return [
        compiler,
        "-std=c++17",
        "-O2",
        "-shared",
        "-fPIC",
        "-fvisibility=hidden",  # only InitializeInjection and course_observer_flush are exported
        *includes,
        SOURCE,
        cupti.library,
        f"-Wl,-rpath,{lib_dir}",
        "-o",
        output,
    ]


def library(env: dict) -> str:
    """The built library's path (cached); raises ObserverUnavailable saying why there is none."""
    cupti = find_cupti(env)
    if isinstance(cupti, str):
        raise ObserverUnavailable(cupti)
    compiler = find_compiler(env)
    if compiler is None:
        raise ObserverUnavailable("no C++ compiler (g++) to build the observer with")
    root = own_private_folder(cache_root(), f"set {CACHE_ENV} to a folder of your own")
    target = os.path.join(root, _key(cupti, compiler), LIBRARY)
    with open(os.path.join(root, "build.lock"), "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # another grading may be building it
        if not os.path.exists(target):
            _build(cupti, compiler, target)
    return target


def _build(cupti: Cupti, compiler: str, target: str) -> None:
    """Built beside its place and renamed there: a build cut short leaves nothing to trust."""
    os.makedirs(os.path.dirname(target), exist_ok=True)
    with tempfile.TemporaryDirectory(dir=os.path.dirname(target)) as scratch:
        output = os.path.join(scratch, LIBRARY)
        command = compile_command(cupti, compiler, output)
        try:
            done = subprocess.run(command, capture_output=True, text=True, timeout=BUILD_TIMEOUT)
        except (OSError, subprocess.TimeoutExpired) as error:
            raise ObserverUnavailable(f"the observer's build could not run: {error}") from error
        if done.returncode != 0:
            raise ObserverUnavailable(
                f"the observer did not build ({' '.join(command)}):\n{(done.stderr or done.stdout)[-2000:]}"
            )
        os.chmod(output, 0o755)
        os.replace(output, target)


class ObserverUnavailable(RuntimeError):
    """Why GPU work cannot be observed on this machine."""

"""A precompiled ATen/ATen.h for the many builds of a test session or a class: the header each
unit's C++ file includes first, parsed once instead of in every compile, where parsing it is
half the compile's time (docs/performance.md, "A precompiled ATen.h").

g++ looks for `ATen/ATen.h.gch` in each include folder just before the header itself, and
uses it only if it was made by the same compiler with compatible options; otherwise it reads
the header as usual. The folder reaches builds through CPATH, so no compile command changes:
a missing, stale or unusable file costs time, never a different build. The folder is named by
torch's version, its headers and the compiler; only the process that makes it writes there
(sandboxed builds read it).

    python -m autograder.precompiled_header BASE     make it under BASE (a lock makes it once)
"""
from __future__ import annotations

import fcntl
import hashlib
import os
import re
import shlex
import subprocess
import sys
import tempfile

from course.build import EXTRA_CFLAGS, compile_extension, kill_group

HEADER = "ATen/ATen.h"
MAKE_SECONDS = 600


def _compiler() -> str:
    return os.environ.get("CXX", "c++")  # the compiler torch's builds use


def folder(base: str) -> str:
    """Where the header made for this torch and this compiler lies under `base`."""
    import torch
    from torch.utils import cpp_extension

    header = os.path.join(cpp_extension.include_paths()[0], HEADER)
    info = os.stat(header)
    try:
        version = subprocess.run([_compiler(), "--version"], capture_output=True, text=True, timeout=60).stdout
    except (OSError, subprocess.TimeoutExpired):
        version = "unknown"
    key = "\n".join([torch.__version__, os.path.realpath(header), str(info.st_size), str(info.st_mtime_ns),
                     _compiler(), version, *EXTRA_CFLAGS])
    return os.path.join(os.path.abspath(base), f"torch-{torch.__version__}-{hashlib.sha256(key.encode()).hexdigest()[:16]}")


def made(where: str) -> bool:
    return os.path.isfile(os.path.join(where, HEADER + ".gch"))


def _build_flags(build_dir: str) -> tuple[list[str], list[str]]:
    """(compiler command, C++ flags) of a build's ninja file, less the module's name."""
    with open(os.path.join(build_dir, "build.ninja")) as handle:
        lines = dict(re.findall(r"^(cxx|cflags) = (.*)$", handle.read(), flags=re.MULTILINE))
    flags = [f for f in shlex.split(lines["cflags"]) if not f.startswith("-DTORCH_EXTENSION_NAME=")]
    return shlex.split(lines["cxx"]), flags


def make(where: str, *, wait: bool = False) -> bool:
    """Make the header in `where` unless it is there or being made (`wait`: until the other
    maker is done); True once it is there. Its options are read from a build of an empty
    extension, so they are the ones torch's builds use here, whatever this torch version adds."""
    from torch.utils import cpp_extension

    os.makedirs(os.path.dirname(os.path.join(where, HEADER)), exist_ok=True)
    with open(where + ".lock", "w") as lock:
        try:
            fcntl.flock(lock, fcntl.LOCK_EX | (0 if wait else fcntl.LOCK_NB))
        except BlockingIOError:
            return made(where)  # another process is making it
        if made(where):
            return True
        with tempfile.TemporaryDirectory(prefix="precompiled_header_") as scratch:
            empty = os.path.join(scratch, "empty.cpp")
            open(empty, "w").close()
            compile_extension("course_precompiled_header_probe", [empty], os.path.join(scratch, "build"))
            compiler, flags = _build_flags(os.path.join(scratch, "build"))
        header = os.path.join(cpp_extension.include_paths()[0], HEADER)
        partial = os.path.join(where, HEADER + ".gch.partial")
        env = {**os.environ, "CCACHE_DISABLE": "1"}  # hundreds of MB: not for the compiler cache
        subprocess.run([*compiler, *flags, "-x", "c++-header", header, "-o", partial], env=env, check=True,
                       stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, timeout=MAKE_SECONDS)
        os.chmod(partial, 0o644)
        # Renamed in whole: a compile that starts meanwhile finds the whole file or none.
        os.replace(partial, os.path.join(where, HEADER + ".gch"))
    return True


def start(base: str) -> tuple[str, subprocess.Popen | None]:
    """The header's folder under `base`, and the process making the header there in the
    background (None: made already). Builds that start before it is done read ATen.h as before.
    Where no folder can be had ('', None), builds go without: it only saves time."""
    try:
        where = folder(base)
        os.makedirs(where, exist_ok=True)  # there when a sandbox opens, to be shown to its runs
    except OSError as error:
        print(f"warning: no precompiled header under {base}: {error}", file=sys.stderr)
        return "", None
    if made(where):
        return where, None
    from autograder.grade import child_env  # the grader's children's environment, the course importable

    with open(where + ".log", "w") as log:
        process = subprocess.Popen([sys.executable, "-m", "autograder.precompiled_header", base], env=child_env(None),
                                   stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
    return where, process


def on_cpath(where: str, cpath: str) -> str:
    """`cpath` (a CPATH value) with `where` first."""
    return os.pathsep.join([where, *(p for p in cpath.split(os.pathsep) if p and p != where)])


def stop(process: subprocess.Popen | None) -> None:
    """End a background make that is still going (with its compiler): nothing outlives its caller."""
    if process is not None and process.poll() is None:
        kill_group(process)


if __name__ == "__main__":
    if len(sys.argv) != 2:
        sys.exit("usage: python -m autograder.precompiled_header BASE")
    sys.exit(0 if make(folder(sys.argv[1])) else 1)

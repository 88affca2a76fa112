"""Precompiled headers for the many builds of a test session or a class: the headers the
units' C++ files include first (ATen/ATen.h from day 02 on, torch/extension.h on day 01),
parsed once instead of in every compile, where parsing them is half the compile's time
(docs/performance.md, "A precompiled ATen.h").

g++ looks for `ATen/ATen.h.gch` in each include folder just before the header itself, and
uses it only if it was made by the same compiler with compatible options; otherwise it reads
the header as usual. g++ can use one only for a file's first include: a second include of the
same header (from a header of the student's own) finds the .gch unusable and then looks for the
header in this folder, so each has a forwarding header beside it (`#include_next`, to torch's).
The folder reaches builds through CPATH, so no compile command changes: a missing, stale or
unusable file costs time, never a different build. The folder is named by
torch's version, its headers and the compiler; only the process that makes it writes there
(sandboxed builds read it).

    python -m autograder.precompiled_header BASE     make them under BASE (a lock makes them once)
"""

from __future__ import annotations

import fcntl
import hashlib
import os
import pathlib
import re
import shlex
import subprocess
import sys
import tempfile

from course.build import EXTRA_CFLAGS, compile_extension, kill_group

HEADERS = ("ATen/ATen.h", "torch/extension.h")  # the first is the one most units include
MAKE_SECONDS = 600


def _compiler() -> str:
    return os.environ.get("CXX", "c++")  # the compiler torch's builds use


def _source(header: str) -> str:
    from torch.utils import cpp_extension

    return os.path.join(cpp_extension.include_paths()[0], header)


def folder(base: str) -> str:
    """Where the headers made for this torch and this compiler lie under `base`."""
    import torch

    try:
        version = subprocess.run([_compiler(), "--version"], capture_output=True, text=True, timeout=60).stdout
    except (OSError, subprocess.TimeoutExpired):
        version = "unknown"
    stamps = []  # each header's file: a new torch's headers make a new folder
    for path in map(_source, HEADERS):
        info = os.stat(path)
        stamps.append(f"{os.path.realpath(path)} {info.st_size} {info.st_mtime_ns}")
    key = "\n".join([torch.__version__, *stamps, _compiler(), version, *EXTRA_CFLAGS])
    return os.path.join(
        os.path.abspath(base), f"torch-{torch.__version__}-{hashlib.sha256(key.encode()).hexdigest()[:16]}"
    )


def _made(where: str, header: str) -> bool:
    return all(os.path.isfile(os.path.join(where, header + end)) for end in (".gch", ""))


def _write_whole(path: str, write) -> None:
    """Made as path.partial, then renamed in whole: a compile that starts meanwhile finds the
    whole file or none."""
    partial = path + ".partial"
    write(partial)
    os.chmod(partial, 0o644)
    os.replace(partial, path)


def made(where: str) -> bool:
    return all(_made(where, header) for header in HEADERS)


def _build_flags(build_dir: str) -> tuple[list[str], list[str]]:
    """(compiler command, C++ flags) of a build's ninja file, less the module's name."""
    with open(os.path.join(build_dir, "build.ninja")) as handle:
        lines = dict(re.findall(r"^(cxx|cflags) = (.*)$", handle.read(), flags=re.MULTILINE))
    flags = [f for f in shlex.split(lines["cflags"]) if not f.startswith("-DTORCH_EXTENSION_NAME=")]
    return shlex.split(lines["cxx"]), flags


def make(where: str, *, wait: bool = False) -> bool:
    """Make the headers in `where` unless they are there or being made (`wait`: until the other
    maker is done); True once they are there. Their options are read from a build of an empty
    extension, so they are the ones torch's builds use here, whatever this torch version adds."""
    os.makedirs(where, exist_ok=True)
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
        env = {**os.environ, "CCACHE_DISABLE": "1"}  # hundreds of MB: not for the compiler cache
        for header in HEADERS:
            path = os.path.join(where, header)
            os.makedirs(os.path.dirname(path), exist_ok=True)
            if not os.path.isfile(path):
                _write_whole(path, lambda partial: pathlib.Path(partial).write_text(f"#include_next <{header}>\n"))
            if not os.path.isfile(path + ".gch"):
                _write_whole(
                    path + ".gch",
                    lambda partial: subprocess.run(
                        [*compiler, *flags, "-x", "c++-header", _source(header), "-o", partial],
                        env=env,
                        check=True,
                        stdout=subprocess.DEVNULL,
                        stderr=subprocess.DEVNULL,
                        timeout=MAKE_SECONDS,
                    ),
                )
    return True


def start(base: str) -> tuple[str, subprocess.Popen | None]:
    """The headers' folder under `base`, and the process making them there in the background
    (None: made already). Builds that start before one is done read that header as before.
    Where no folder can be had ('', None), builds go without: it only saves time."""
    try:
        where = folder(base)
        os.makedirs(where, exist_ok=True)  # there when a sandbox opens, to be shown to its runs
    except OSError as error:
        print(f"warning: no precompiled header under {base}: {error}", file=sys.stderr)
        return "", None
    if made(where):
        return where, None
    from autograder.machine import child_env  # the grader's children's environment, the course importable

    with open(where + ".log", "w") as log:
        process = subprocess.Popen(
            [sys.executable, "-m", "autograder.precompiled_header", base],
            env=child_env(None),
            stdout=log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
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

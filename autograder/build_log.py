"""What of a failed build's log goes into the report: the first errors in the student's own
files, and in public headers (torch, CUDA, the C++ library). A compiler quotes the line it
fails on, so an error in any other file (`#include "/etc/passwd"`) is named, never shown."""

from __future__ import annotations

import os
import re

MAX_CHARS = 3000
# A failed build's whole log, written beside results.json for the instructor only (it may quote
# any file the compiler was pointed at).
BUILD_LOG = "build.log"
_INCLUDED = re.compile(r"^(?:In file included from|\s+from) (?P<file>.+?):(?P<line>\d+)[:,]?\s*$")
_GCC = re.compile(r"^(?P<file>[^\s:(][^:(]*?):(?:\d+:)*\s*(?P<message>.*)$")
_NVCC = re.compile(r"^(?P<file>[^\s(]+)\((?P<line>\d+)\): (?P<message>.*)$")
_ERROR = re.compile(r"\b(fatal error|error)\b", re.IGNORECASE)
_OTHER_ERROR = re.compile(r"\berror\b|undefined reference|undefined symbol", re.IGNORECASE)
_SOURCE_SUFFIXES = (".cpp", ".cu", ".h", ".cuh", ".hpp", ".c", ".cc", ".cxx")


def public_roots(env: dict) -> list[str]:
    """Folders of headers anyone can read anyway: torch's, CUDA's, the system's."""
    import torch

    roots = [
        os.path.join(os.path.dirname(torch.__file__), "include"),
        "/usr/include",
        "/usr/lib/gcc",
        "/usr/local/include",
    ]
    if env.get("CUDA_HOME"):
        roots += [os.path.join(env["CUDA_HOME"], "include"), os.path.join(env["CUDA_HOME"], "targets")]
    return [os.path.realpath(root) for root in roots]


def _inside(path: str, root: str) -> bool:
    return path == root or path.startswith(root.rstrip(os.sep) + os.sep)


class _Files:
    """Says whose a path in the log is, resolved as the compiler (run in build_dir) saw it."""

    def __init__(self, source_dir: str, build_dir: str, public: list[str]):
        self.source_dir, self.build_dir = os.path.realpath(source_dir), build_dir
        self.public = public

    def shown_as(self, path: str) -> str | None:
        """How to name `path` in the report, or None if its lines must not be shown."""
        real = os.path.realpath(os.path.join(self.build_dir, path.strip()))
        if _inside(real, self.source_dir):
            return os.path.relpath(real, self.source_dir)
        if any(_inside(real, root) for root in self.public):
            return path.strip()
        return None


def _location(line: str):
    """The match of a compiler's `file:line: message` or `file(line): message`, else None."""
    if line[:1].isspace():
        return None
    found = _NVCC.match(line) or _GCC.match(line)
    if found and (os.sep in found["file"] or found["file"].endswith(_SOURCE_SUFFIXES)):
        return found
    return None


def student_errors(log: str, source_dir: str, build_dir: str, public: list[str], limit: int = 3) -> str:
    """The first `limit` errors with the lines after them (the quoted source and its caret),
    at most MAX_CHARS."""
    files = _Files(source_dir, build_dir, public)
    blocks: list[list[str]] = []
    others: list[str] = []  # lines that say "error" outside any compiler message (linker, ninja)
    chain: list[str] = []  # "In file included from" lines before the next message
    block: list[str] | None = None
    hidden = False  # in the lines of a file that is not shown
    for line in log.splitlines():
        included, located = _INCLUDED.match(line), _location(line)
        if included:
            name = files.shown_as(included["file"])
            chain += [f"In file included from {name}:{included['line']}"] if name else []
            block, hidden = None, False
        elif located:
            name = files.shown_as(located["file"])
            block, hidden = None, name is None
            if _ERROR.search(located["message"]):
                block = [
                    *chain,
                    line.replace(located["file"], name, 1)
                    if name
                    else f"an error in {located['file'].strip()}, which is not one of your files: "
                    "its lines are not shown",
                ]
                blocks.append(block)
            chain = []
        elif block is not None and not hidden and len(block) < len(chain) + 3:
            block.append(line)
        elif not hidden and _OTHER_ERROR.search(line) and len(line) < 300:
            others.append(line)
    text = "\n".join("\n".join(b).rstrip() for b in blocks[:limit]) or "\n".join(others[:limit])
    return text[:MAX_CHARS]

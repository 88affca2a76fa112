"""Code in a submission's sources that would hide its PyTorch calls from the own-code check.

The check's observers run in the student's process (course/own_code.py): the profiler, which
sees every call through the dispatcher, and a dispatch mode, which sees the calls made while no
profiler is on. An op can slip past both by computing with PyTorch only when the profiler is off
and with the dispatch mode's key excluded, or past either by calling ATen's kernels below the
dispatcher. What it needs for that has names, which the grader reads here in the submission's
sources, as data, before its build runs: a source that names one fails the own-code cases.
Names built at run time (getattr on a string, a macro that pastes tokens) are not seen.
"""

from __future__ import annotations

import os
import re

from autograder.untrusted_files import is_regular_file, open_regular

SOURCE_SUFFIXES = (".py", ".c", ".cc", ".cpp", ".cxx", ".cu", ".cuh", ".h", ".hh", ".hpp", ".inl")
MAX_SOURCE_BYTES = 1 << 20  # the submission reader's limit: nothing larger reaches a build

# (what it does, the pattern that names it). None is needed to compute an op: a guard of the
# autograd keys alone (at::AutoDispatchBelowADInplaceOrView, day09's) leaves the dispatch mode's
# key in place, and is not among them.
HIDING = (
    (
        "changes which dispatch keys run, which hides ops from the dispatch mode",
        re.compile(
            r"\b_?(Exclude|Include|Force)DispatchKeyGuard\b|\b(_dispatch_)?tls_set_dispatch_key_(excluded|included)\b"
            r"|\b_?force_tls_local_dispatch_key_set\b|\bDispatchKey\s*(::|\.)\s*Python(TLSSnapshot)?\b"
        ),
    ),
    (
        "turns off the dispatch modes",
        re.compile(
            r"\b_?Disable(TorchDispatch|PythonDispatcher)\b|\bTorchDispatchModeTLS\b|\b_pop_torch_dispatch_stack\b"
            r"|\b_disable_current_modes\b|\b_pop_mode_temporarily\b|\b_unset_dispatch_mode\b"
        ),
    ),
    (
        "asks whether a profiler or a dispatch mode watches it",
        re.compile(
            r"\b_?(is_)?profiler_?[eE]nabled\b|\bprofilerEnabled\b|\bhas(ThreadLocal|Global)?Callbacks\b"
            r"|\b_get_current_dispatch_mode\w*|\b_len_torch_dispatch_stack\b|\bis_in_torch_dispatch_mode\b"
        ),
    ),
    (
        "calls ATen's kernels below the dispatcher, where neither observer sees them",
        re.compile(
            r"\bnative\s*::|\bat\s*::\s*(cpu|meta|composite\w*)\s*::|\bredispatch\b|\b_op_dk\b"
            r"|#\s*include\s*[<\"]ATen/(native/|ops/\w+_(native|\w*dispatch)\.h"
            r"|(CPU|CUDA|Native|Redispatch|Composite\w*)Functions)"
        ),
    ),
)


def hiding_problems(text: str) -> list[str]:
    """Each line of `text` that names a hiding call: where, the name, and what it does."""
    return [
        f"line {number} names {found.group(0).strip()!r}, which {what}"
        for number, line in enumerate(text.splitlines(), 1)
        for what, pattern in HIDING
        if (found := pattern.search(line))
    ]


def hidden_calls(source_dir: str) -> tuple[str, ...]:
    """One line per source file under `source_dir` that names a hiding call: the file, the line,
    the name and what it does. Links and files past the reader's limit are not read."""
    found = []
    for folder, folders, names in os.walk(source_dir):
        folders.sort()
        for name in sorted(names):
            path = os.path.join(folder, name)
            if not name.endswith(SOURCE_SUFFIXES) or not is_regular_file(path):
                continue
            with open_regular(path) as handle:
                text = handle.read(MAX_SOURCE_BYTES).decode(errors="replace")
            found += [f"{os.path.relpath(path, source_dir)}, {problem}" for problem in hiding_problems(text)]
    return tuple(found)

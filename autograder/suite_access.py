"""What the grader's children see of the course's solutions: the suite a test process imports
(named in its request), the files it may read, and the folders no run may read (a bubblewrap
run sees them empty; a uid run may not enter them, and reads a copy of the suite) (docs/security.md)."""

from __future__ import annotations

import glob
import os

from autograder.sandbox import Sandbox
from course.spec.units import Unit


def suite_request(unit: Unit, sandbox: Sandbox) -> dict:
    """What a child's request names of the suite to import, where the child's sandbox shows it."""
    return {"solutions": sandbox.seen_as(unit.solutions), "unit": unit.name}


def suite_files(unit: Unit) -> list[str]:
    """What a test process reads of the course's solutions: the unit's public suite (the ops'
    calls; each case comes to it as data) and the shared Python pieces it may import. Under
    bubblewrap it sees nothing else there: no hidden case, reference source, answer key or
    mutant, and no other unit."""
    common = os.path.join(unit.solutions, "common")
    shared = sorted(glob.glob(os.path.join(common, "*.py")))
    return [unit.suite_path(hidden=False), *shared]


def hidden_from_runs(unit: Unit, *batch_paths: str | None) -> list[str]:
    """Folders a bwrap run sees empty: the course's solutions (but for suite_files), and in a
    batch the folders of its GPU locks and kept builds (batch_paths: files in them). A run of
    the grader's own uid could otherwise take a lock and hold up another grading's timing, or
    read another student's sources."""
    git = _git_folder(os.path.dirname(os.path.abspath(unit.solutions)))
    folders = [unit.solutions, git, *(os.path.dirname(os.path.abspath(path)) for path in batch_paths if path)]
    return [f for f in folders if not any(f != o and f.startswith(o.rstrip(os.sep) + os.sep) for o in folders)]


def _git_folder(checkout: str) -> str:
    """The folder of the repository's objects, which hold every file of solutions/ too (`git
    show` reads them): `.git`, or in a worktree (`.git` a file naming its own folder) the
    main repository's, which holds them for every worktree."""
    git = os.path.join(checkout, ".git")
    if not os.path.isfile(git):
        return git
    with open(git) as handle:
        own = os.path.join(checkout, handle.read().removeprefix("gitdir:").strip())
    common = os.path.join(own, "commondir")
    if os.path.isfile(common):
        with open(common) as handle:
            return os.path.normpath(os.path.join(own, handle.read().strip()))
    return os.path.normpath(own)

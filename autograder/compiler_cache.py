"""The shared compiler cache (ccache, where CCACHE_DIR names one): written only by builds of the
course's own code, read by every submission's build, never written by one, and never holding
the reference's objects where a submission is graded.

A submission's build runs in the sandbox with the cache mounted read-only (autograder/sandbox.py):
an entry it could write under the key of a file a classmate leaves unchanged would become that
classmate's object code. What the cache holds comes from here instead: each unit's template (its
given files, public anyway; the reference's objects would be a solution any build could link),
built as the sandbox builds (sources in src/ beside build/; course/build.py keys the
cache by paths relative to the folder holding both), so that a submission's files that equal
them are compiled once, not once per student.

    python -m autograder.compiler_cache [--with-solutions] [UNIT ...]   every unit's, or the named
        units'; --with-solutions also the references: only where no student code is graded (the
        test suite, which grades the course's own mutants)
"""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile

from course.build import BuildError, build_in_subprocess, kill_group
from course.spec import units
from course.spec.units import Unit

TEMPLATE, SOLUTION = "template", "solution"
BUILD_SECONDS = 900


def enabled(env: dict) -> bool:
    return bool(env.get("CCACHE_DIR")) and "CCACHE_DISABLE" not in env


def warm(unit: Unit, env: dict, parent: str | None = None, kinds: tuple[str, ...] = (TEMPLATE,)) -> list[str]:
    """Build `unit` as each of `kinds` with the cache writable; what failed, in words (a
    template whose build fails is the unit's bug, reported by its own tests)."""
    problems = []
    for kind in kinds:
        with tempfile.TemporaryDirectory(prefix=f"warm_{unit.name}_", dir=parent) as scratch:
            source_dir, build_dir = os.path.join(scratch, "src"), os.path.join(scratch, "build")
            # A package's template, its build files written (its own are TODOs that stop pip):
            # the objects of its given sources are what a submission's build finds.
            unit.write("buildable" if kind == TEMPLATE else kind, source_dir)
            try:
                build_in_subprocess(unit.plan(), source_dir, build_dir, timeout=BUILD_SECONDS, env=env)
            except BuildError as error:
                problems.append(f"{unit.name} {kind}: {error.summary}")
    return problems


def start(log_path: str) -> subprocess.Popen | None:
    """Warm the cache for every unit, references included, in a process of its own (None: no
    cache to warm), for the test suite; its output goes to `log_path`. Builds that start before it reaches their unit compile as before."""
    if not enabled(os.environ):
        return None
    with open(log_path, "w") as log:
        return subprocess.Popen(
            [sys.executable, "-m", "autograder.compiler_cache", "--with-solutions"],
            stdout=log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )


def stop(process: subprocess.Popen | None) -> None:
    """End a warming still going, with its compilers: nothing outlives its caller."""
    if process is not None and process.poll() is None:
        kill_group(process)


def main(args: list[str]) -> int:
    kinds = (TEMPLATE, SOLUTION) if "--with-solutions" in args else (TEMPLATE,)
    names = [arg for arg in args if arg != "--with-solutions"]
    env = dict(os.environ)
    if not enabled(env):
        print("no shared compiler cache (CCACHE_DIR unset): nothing to warm", file=sys.stderr)
        return 0
    chosen = [units.load(name) for name in names] if names else units.all_units()
    problems = [problem for unit in chosen if unit.build != "none" for problem in warm(unit, env, kinds=kinds)]
    for problem in problems:
        print(f"warning: {problem}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))

"""Wrong submissions kept to prove the hidden suite catches each mistake.

solutions/<unit>/mutants.toml lists mutants: edits to the reference solution and
the exact tests each must lose (fnmatch patterns, minus `keeps`), on a machine
with a GPU. On a machine without one, the CUDA tests are not run and only the
rest are compared. autograder/hostile/hostile.toml lists submissions that attack the
grader itself, in the same form, and solutions/<unit>/planted_bugs.toml bugs that a tool
(compute-sanitizer) must find whatever the tests see.
"""

from __future__ import annotations

import fnmatch
import os
import tomllib
from dataclasses import dataclass

from course.spec.units import Unit


@dataclass(frozen=True)
class Mutant:
    name: str
    about: str
    loses: tuple[str, ...]
    keeps: tuple[str, ...]
    edits: tuple[dict, ...]
    gpu_only: bool
    perf_partial: bool = False  # its perf tests together earn some points, not all
    timed: bool = False  # its verdict rests on measured times: its test runs alone on the GPU
    # Hostile submissions (autograder/hostile/hostile.toml) say more about how they are graded:
    says: str = ""  # what the output of every test it loses contains
    not_run: tuple[str, ...] = ()  # tests reported as not run (fnmatch patterns)
    tests: tuple[str, ...] = ()  # grade only these tests (fnmatch patterns); all when empty
    submission: str = ""  # a file that is the whole submission, instead of edits
    after_exit: bool = False  # graded by the command line; its report is checked after it exits
    time_limit: float = 0.0  # the whole grading's, in seconds (0: the grader's own)
    case_timeout: float = 0.0  # a cap on every test's time limit (0: none)
    min_gpus: int = 0  # what it loses shows only on a machine with this many GPUs
    sandbox: str = ""  # the sandbox mode its verdict needs; graded elsewhere, it is skipped
    # Planted bugs (solutions/<unit>/planted_bugs.toml) say which tool finds them:
    found_by: str = ""  # a compute-sanitizer tool, a lab's suite tool (gradcheck), or "tests"
    either: tuple[str, ...] = ()  # tests a race loses only sometimes: lost or kept, both are right
    # The cause it plants, as the grader reads it from the wrong outputs (course/hints.py, an op's
    # `diagnose`): ((fnmatch pattern, line), ...); under each test it loses, the line of the first
    # pattern that matches the test's name ("" or none: no claim there). In the toml, a string
    # (the line under every test it loses) or a table {pattern: line}, in order.
    diagnosis: tuple[tuple[str, str], ...] = ()
    # A debugging lab's bug (a BUG region) says what a student sees and what its tool reports:
    symptom: str = ""
    report: str = ""
    # Its grading builds what no other test of the default run builds (a package's own build
    # files changed: its objects and link are its own): `-m slow` runs it.
    slow: bool = False

    def expected_losses(self, test_names: list[str]) -> set[str]:
        lost = {n for n in test_names if any(fnmatch.fnmatchcase(n, p) for p in self.loses)}
        return {n for n in lost if not any(fnmatch.fnmatchcase(n, p) for p in self.keeps)}

    def diagnosis_for(self, test_name: str) -> str:
        """The line the grader's output under `test_name` names the planted cause with, or ''."""
        return next((line for pattern, line in self.diagnosis if fnmatch.fnmatchcase(test_name, pattern)), "")

    def unsettled(self, test_names: list[str]) -> set[str]:
        """The tests whose verdict says nothing about this mutant (`either`)."""
        return {n for n in test_names if any(fnmatch.fnmatchcase(n, p) for p in self.either)}


def load(unit: Unit) -> dict[str, Mutant]:
    path = unit.mutants_path
    if not os.path.exists(path):
        return {}
    return load_file(path)


def load_planted(unit: Unit) -> dict[str, Mutant]:
    """The unit's planted bugs. One without edits is a BUG region of the unit's sources, by
    name: the starter code ships it, and its edit plants it in the solution."""
    if not os.path.exists(unit.planted_bugs_path):
        return {}
    return load_file(unit.planted_bugs_path, unit.planted_regions())


def load_file(path: str, regions: dict[str, dict] | None = None) -> dict[str, Mutant]:
    """The mutants a toml file lists. An edit is `old` -> `new`, or `append` (`prepend`): a file
    beside the toml whose text goes at the end (the start) of the edited file. An entry without
    edits takes its one edit from `regions` under its name."""
    with open(path, "rb") as handle:
        data = tomllib.load(handle)
    defaults = {key: data[key] for key in ("tests",) if key in data}
    folder = os.path.dirname(os.path.abspath(path))
    found = {}
    for name, entry in data["mutants"].items():
        entry = {**defaults, **entry}
        edits = tuple(_resolved(edit, folder) for edit in entry.get("edits", ()))
        if not edits and regions is not None:
            if name not in regions:
                raise ValueError(f"{path}: {name} has no edits and no BUG region of that name in the sources")
            edits = (regions[name],)
        found[name] = Mutant(
            name,
            entry["about"],
            tuple(entry.get("loses", ())),
            tuple(entry.get("keeps", ())),
            edits,
            entry.get("gpu_only", False),
            entry.get("perf_partial", False),
            entry.get("timed", False),
            entry.get("says", ""),
            tuple(entry.get("not_run", ())),
            tuple(entry.get("tests", ())),
            os.path.join(folder, entry["submission"]) if "submission" in entry else "",
            entry.get("after_exit", False),
            float(entry.get("time_limit", 0)),
            float(entry.get("case_timeout", 0)),
            int(entry.get("min_gpus", 0)),
            entry.get("sandbox", ""),
            entry.get("found_by", ""),
            tuple(entry.get("either", ())),
            _diagnosis(entry.get("diagnosis", ())),
            entry.get("symptom", ""),
            entry.get("report", ""),
            slow=entry.get("slow", False),
        )
    return found


def _diagnosis(declared) -> tuple[tuple[str, str], ...]:
    if isinstance(declared, str):
        return (("*", declared),) if declared else ()
    return tuple((str(pattern), str(line)) for pattern, line in dict(declared).items())


def _resolved(edit: dict, folder: str) -> dict:
    for where in ("append", "prepend"):
        if where in edit:
            with open(os.path.join(folder, edit[where]), encoding="utf-8") as handle:
                return {"file": edit["file"], f"{where}_text": handle.read()}
    return edit


def write(unit: Unit, mutant: Mutant, dest: str) -> None:
    """The reference solution with the mutant's edits, written into dest."""
    unit.write("solution", dest)
    for edit in mutant.edits:
        path = os.path.join(dest, edit["file"])
        with open(path, encoding="utf-8") as handle:
            text = handle.read()
        if "append_text" in edit:
            text += "\n" + edit["append_text"]
        elif "prepend_text" in edit:
            text = edit["prepend_text"] + text
        else:
            count = edit.get("count", 1)
            found = text.count(edit["old"])
            if found != count:
                raise ValueError(
                    f"mutant {mutant.name}: expected {count} occurrence(s) of its edit in "
                    f"{edit['file']}, found {found}: the solution changed, update the mutant"
                )
            text = text.replace(edit["old"], edit["new"])
        with open(path, "w", encoding="utf-8") as handle:
            handle.write(text)

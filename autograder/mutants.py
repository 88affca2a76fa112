"""Wrong submissions kept to prove the hidden suite catches each mistake.

solutions/<unit>/mutants.toml lists mutants: edits to the reference solution and
the exact tests each must lose (fnmatch patterns, minus `keeps`), on a machine
with a GPU. On a machine without one, the CUDA tests are not run and only the
rest are compared.
"""
from __future__ import annotations

import fnmatch
import os
import tomllib
from dataclasses import dataclass

from course.authoring.units import Unit

@dataclass(frozen=True)
class Mutant:
    name: str
    about: str
    loses: tuple[str, ...]
    keeps: tuple[str, ...]
    edits: tuple[dict, ...]
    gpu_only: bool
    perf_partial: bool = False  # its perf tests together earn some points, not all

    def expected_losses(self, test_names: list[str]) -> set[str]:
        lost = {n for n in test_names if any(fnmatch.fnmatchcase(n, p) for p in self.loses)}
        return {n for n in lost if not any(fnmatch.fnmatchcase(n, p) for p in self.keeps)}


def load(unit: Unit) -> dict[str, Mutant]:
    path = unit.mutants_path
    if not os.path.exists(path):
        return {}
    with open(path, "rb") as handle:
        data = tomllib.load(handle)["mutants"]
    return {name: Mutant(name, entry["about"], tuple(entry["loses"]), tuple(entry.get("keeps", ())),
                         tuple(entry["edits"]), entry.get("gpu_only", False), entry.get("perf_partial", False))
            for name, entry in data.items()}


def write(unit: Unit, mutant: Mutant, dest: str) -> None:
    """The reference solution with the mutant's edits, written into dest."""
    unit.write("solution", dest)
    for edit in mutant.edits:
        path = os.path.join(dest, edit["file"])
        with open(path, encoding="utf-8") as handle:
            text = handle.read()
        count = edit.get("count", 1)
        found = text.count(edit["old"])
        if found != count:
            raise ValueError(f"mutant {mutant.name}: expected {count} occurrence(s) of its edit in "
                             f"{edit['file']}, found {found}: the solution changed, update the mutant")
        with open(path, "w", encoding="utf-8") as handle:
            handle.write(text.replace(edit["old"], edit["new"]))

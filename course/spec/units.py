"""The course's units: each one folder, solutions/<unit>/, holding all its authored material.

    unit.toml         title, files, how the unit is built and loaded (see Unit)
    lesson.md         the notebook's text and cells
    <sources>         the reference sources, with marked regions (course/spec/regions.py)
    public_tests.py   the op's contract and the cases students see, shipped verbatim
    hidden_tests.py   imports public_tests and adds the cases only the autograder runs
    mutants.toml      wrong submissions and the tests each must lose

solutions/common/ holds what several units share: headers written beside their sources,
and the Python pieces their test suites import.
"""

from __future__ import annotations

import os
import tomllib
from dataclasses import dataclass

from course import suites
from course.build import BUILD_KINDS, LOAD_KINDS, Plan
from course.spec import regions


def _course_root() -> str:
    """The folder holding solutions/: the checkout this code runs from, else the copy that
    `pip install .` puts beside the grader (autograder/solutions/, pyproject.toml's package data)."""
    checkout = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    if os.path.isfile(os.path.join(checkout, "pyproject.toml")) and os.path.isdir(os.path.join(checkout, "solutions")):
        return checkout
    return os.path.join(checkout, "autograder")


REPO = _course_root()


@dataclass(frozen=True)
class Unit:
    name: str
    title: str
    sources: tuple[str, ...]
    common: tuple[str, ...] = ()
    given: tuple[tuple[str, str], ...] = ()  # (file, unit it comes from): earlier work, handed over solved
    build: str = "jit"  # how a submission is built: jit, wheel or none (course/build.py)
    load: str = "pybind"  # what the tests call: pybind, torch_ops or python (course/loading.py)
    namespace: str = ""  # torch_ops: the TORCH_LIBRARY namespace
    package: str = ""  # wheel: the import name of the student's package
    profiled_kernels: tuple[str, ...] = ()  # kernels the notebook's profiler cell must report
    # Files the build runs (a package's pyproject.toml and setup.py): their TODOs fail the build.
    build_files: tuple[str, ...] = ()
    repo: str = REPO  # the course folder: solutions/, src_templates/ and notebooks/ in it

    @property
    def day(self) -> str:
        return self.name.split("_", 1)[0]

    @property
    def solutions(self) -> str:
        return os.path.join(self.repo, "solutions")

    @property
    def folder(self) -> str:
        return os.path.join(self.solutions, self.name)

    @property
    def given_files(self) -> tuple[str, ...]:
        return tuple(file for file, _ in self.given)

    @property
    def files(self) -> tuple[str, ...]:
        """Every file a submission has: shared headers, files given from earlier units, then
        the unit's own sources."""
        return self.common + self.given_files + self.sources

    def plan(self) -> Plan:
        """What the runtime needs to build and load the unit's files."""
        return Plan(self.name, self.build, self.load, self.files, self.namespace, self.package)

    def solution_path(self, file: str) -> str:
        """Where `file` is authored. A shared or given file may sit in a folder of this unit's
        (a package's csrc/, say): it is looked up by its name alone where it comes from."""
        if file in self.common:
            return os.path.join(self.solutions, "common", os.path.basename(file))
        if file in self.given_files:
            return os.path.join(self.solutions, dict(self.given)[file], os.path.basename(file))
        return os.path.join(self.folder, file)

    def raw(self, file: str) -> str:
        with open(self.solution_path(file), encoding="utf-8") as handle:
            return handle.read()

    def solution(self, file: str) -> str:
        return regions.solution_text(self.raw(file), self.solution_path(file))

    def template(self, file: str) -> str:
        if file in self.given_files:  # yesterday's work arrives finished
            return self.solution(file)
        return regions.template_text(self.raw(file), self.solution_path(file))

    def tests(self, hidden: bool = True):
        """The unit's test suite as a module: every case, or with hidden False the public ones."""
        return suites.import_suite(self.solutions, self.name, hidden)

    def suite_path(self, hidden: bool = True) -> str:
        return os.path.join(self.folder, (suites.HIDDEN if hidden else suites.PUBLIC) + ".py")

    def has_tests(self) -> bool:
        return os.path.exists(self.suite_path(hidden=False))

    @property
    def mutants_path(self) -> str:
        return os.path.join(self.folder, "mutants.toml")

    @property
    def planted_bugs_path(self) -> str:
        return os.path.join(self.folder, "planted_bugs.toml")

    def planted_regions(self) -> dict[str, dict]:
        """{bug name: the edit that plants it in the solution ({file, old, new})} of every BUG
        region in the unit's own sources: the debugging lab's starter bugs."""
        found = {}
        for file in self.sources:
            for name, (fixed, planted) in regions.planted_bugs(self.raw(file), self.solution_path(file)).items():
                if name in found:
                    raise regions.RegionError(f"{self.name}: bug {name!r} is planted in two files")
                found[name] = {"file": file, "old": fixed, "new": planted}
        return found

    def public_test_files(self) -> dict[str, str]:
        """{path relative to the units folder: text} of what the public suite imports: its own
        file and the shared Python pieces in common/ (written into a notebook verbatim)."""
        files = {f"{self.name}/{suites.PUBLIC}.py": _read(self.suite_path(hidden=False))}
        common = os.path.join(self.solutions, "common")
        for entry in sorted(os.listdir(common)) if os.path.isdir(common) else ():
            if entry.endswith(".py"):
                files[f"common/{entry}"] = _read(os.path.join(common, entry))
        return files

    def buildable(self, file: str) -> str:
        """The template once the build's own files are written: where a student's tests start."""
        return self.solution(file) if file in self.build_files else self.template(file)

    def write(self, kind: str, dest: str) -> list[str]:
        """Write the unit's files as `kind` ('solution', 'template' or 'buildable') into dest;
        return their paths."""
        render = {"solution": self.solution, "template": self.template, "buildable": self.buildable}[kind]
        paths = []
        for file in self.files:
            path = os.path.join(dest, file)
            os.makedirs(os.path.dirname(path), exist_ok=True)
            with open(path, "w", encoding="utf-8") as handle:
                handle.write(render(file))
            paths.append(path)
        return paths


def _read(path: str) -> str:
    with open(path, encoding="utf-8") as handle:
        return handle.read()


def load(name: str, repo: str = REPO) -> Unit:
    path = os.path.join(repo, "solutions", name, "unit.toml")
    with open(path, "rb") as handle:
        data = tomllib.load(handle)
    given = tuple((file, unit) for unit, files in data.get("given", {}).items() for file in files)
    unit = Unit(
        name,
        data["title"],
        tuple(data["sources"]),
        tuple(data.get("common", ())),
        given,
        build=data.get("build", "jit"),
        load=data.get("load", "pybind"),
        namespace=data.get("namespace", ""),
        package=data.get("package", ""),
        profiled_kernels=tuple(data.get("notebook", {}).get("profiled_kernels", ())),
        build_files=tuple(data.get("build_files", ())),
        repo=repo,
    )
    if unit.build not in BUILD_KINDS or unit.load not in LOAD_KINDS:
        raise ValueError(
            f"{path}: build must be one of {', '.join(BUILD_KINDS)} and load one of "
            f"{', '.join(LOAD_KINDS)}; got build = {unit.build!r}, load = {unit.load!r}"
        )
    if unit.load == "torch_ops" and not unit.namespace:
        raise ValueError(f"{path}: load = 'torch_ops' needs namespace = '<the TORCH_LIBRARY namespace>'")
    if unit.build == "wheel" and not unit.package:
        raise ValueError(f"{path}: build = 'wheel' needs package = '<the package's import name>'")
    if not set(unit.build_files) <= set(unit.sources):
        raise ValueError(f"{path}: build_files must be among the unit's sources")
    return unit


def all_units(repo: str = REPO) -> list[Unit]:
    solutions = os.path.join(repo, "solutions")
    return [
        load(entry, repo)
        for entry in sorted(os.listdir(solutions))
        if os.path.exists(os.path.join(solutions, entry, "unit.toml"))
    ]

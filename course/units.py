"""The course's units: where their files are and how to render them."""
from __future__ import annotations

import os
import tomllib
from dataclasses import dataclass

from course import regions

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SOLUTIONS = os.path.join(REPO, "solutions")
TEMPLATES = os.path.join(REPO, "src_templates")
NOTEBOOKS = os.path.join(REPO, "notebooks")
SPECS = os.path.join(REPO, "autograder", "units")


@dataclass(frozen=True)
class Unit:
    name: str
    title: str
    sources: tuple[str, ...]
    common: tuple[str, ...]
    given: tuple[tuple[str, str], ...] = ()  # (file, unit it comes from): earlier work, handed over solved

    @property
    def day(self) -> str:
        return self.name.split("_", 1)[0]

    @property
    def given_files(self) -> tuple[str, ...]:
        return tuple(file for file, _ in self.given)

    @property
    def files(self) -> tuple[str, ...]:
        """Every file a submission has: shared headers, files given from earlier units, then
        the unit's own sources."""
        return self.common + self.given_files + self.sources

    @property
    def built(self) -> tuple[str, ...]:
        """What the build takes, in order: compiled sources and the Python files (last is the entry)."""
        return tuple(f for f in self.files if f.endswith((".cpp", ".cu", ".py")))

    def solution_path(self, file: str) -> str:
        if file in self.common:
            return os.path.join(SOLUTIONS, "common", file)
        return os.path.join(SOLUTIONS, dict(self.given).get(file, self.name), file)

    def raw(self, file: str) -> str:
        with open(self.solution_path(file), encoding="utf-8") as handle:
            return handle.read()

    def solution(self, file: str) -> str:
        return regions.solution_text(self.raw(file), self.solution_path(file))

    def template(self, file: str) -> str:
        if file in self.given_files:  # yesterday's work arrives finished
            return self.solution(file)
        return regions.template_text(self.raw(file), self.solution_path(file))

    def spec_path(self) -> str:
        return os.path.join(SPECS, self.name + ".py")

    def public_spec(self) -> str:
        with open(self.spec_path(), encoding="utf-8") as handle:
            return regions.public_text(handle.read(), self.spec_path())

    def load_spec(self, public_only: bool = False):
        """The unit's spec as a module; with public_only, without its hidden part (what the
        notebook gets)."""
        import importlib.util
        import types

        if public_only:
            module = types.ModuleType(f"public_{self.name}")
            exec(compile(self.public_spec(), self.spec_path(), "exec"), module.__dict__)  # noqa: S102
            return module
        spec = importlib.util.spec_from_file_location(f"spec_{self.name}", self.spec_path())
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
        return module

    def write(self, kind: str, dest: str) -> list[str]:
        """Write the unit's files as `kind` ('solution' or 'template') into dest; return their paths."""
        render = self.solution if kind == "solution" else self.template
        os.makedirs(dest, exist_ok=True)
        paths = []
        for file in self.files:
            path = os.path.join(dest, file)
            with open(path, "w", encoding="utf-8") as handle:
                handle.write(render(file))
            paths.append(path)
        return paths


def load(name: str) -> Unit:
    with open(os.path.join(SOLUTIONS, name, "unit.toml"), "rb") as handle:
        data = tomllib.load(handle)
    given = tuple((file, unit) for unit, files in data.get("given", {}).items() for file in files)
    return Unit(name, data["title"], tuple(data["sources"]), tuple(data.get("common", ())), given)


def all_units() -> list[Unit]:
    return [load(entry) for entry in sorted(os.listdir(SOLUTIONS))
            if os.path.exists(os.path.join(SOLUTIONS, entry, "unit.toml"))]

"""A unit's test suites, imported from its folder.

`<unit>/public_tests.py` holds the op's contract and the cases students see (the notebook
ships it verbatim); `<unit>/hidden_tests.py` imports it and adds the cases only the
autograder runs. A test is visible if and only if the public file defines it: nothing is
cut out of a file to decide that.

The folder holding the units is imported as one package, so a suite reaches pieces that
several units share with a relative import (`from ..common.layernorm_tests import ...`),
here from solutions/, in a notebook from the installed runtime (`public_root`).
"""

from __future__ import annotations

import hashlib
import importlib
import os
import sys
import types

PUBLIC = "public_tests"
HIDDEN = "hidden_tests"
PACKAGED_UNITS = "units"  # an installed runtime's folder of the released units' public suites


def public_root() -> str:
    """The folder holding the public suites: COURSE_UNITS where set (another course's units
    folder), an installed runtime's course/units/, or, in a course checkout, its solutions/."""
    if os.environ.get("COURSE_UNITS"):
        return os.environ["COURSE_UNITS"]
    here = os.path.dirname(os.path.abspath(__file__))
    packaged = os.path.join(here, PACKAGED_UNITS)
    return packaged if os.path.isdir(packaged) else os.path.join(os.path.dirname(here), "solutions")


def _package(root: str) -> str:
    """The package name of the folder `root` (one per folder, so that a course's units and a
    temporary one never shadow each other in a process)."""
    root = os.path.realpath(root)
    name = "course_units_" + hashlib.sha256(root.encode()).hexdigest()[:12]
    if name not in sys.modules:
        package = types.ModuleType(name)
        package.__path__ = [root]
        sys.modules[name] = package
    return name


def import_suite(root: str, unit: str, hidden: bool):
    """The unit's hidden suite (every case) or its public one, as a module."""
    return importlib.import_module(f"{_package(root)}.{unit}.{HIDDEN if hidden else PUBLIC}")

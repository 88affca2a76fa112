"""Build a unit's reference solution in a fresh temporary folder, for the bench scripts."""

import os
import tempfile

from course.loading import build_and_load
from course.spec import units


def build_reference(unit_name: str):
    """(module, build seconds) of the unit's solution, built from scratch."""
    unit = units.load(unit_name)
    folder = tempfile.mkdtemp(prefix=f"{unit_name}_")
    unit.write("solution", folder)
    return build_and_load(unit.plan(), folder, os.path.join(folder, "build"))

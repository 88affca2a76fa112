"""Build a unit's reference solution in a fresh temporary folder, for the bench scripts."""
import os
import tempfile

from course import units
from course.build import build_extension


def build_reference(unit_name: str):
    """(module, build seconds) of the unit's solution, built from scratch."""
    unit = units.load(unit_name)
    folder = tempfile.mkdtemp(prefix=f"{unit_name}_")
    unit.write("solution", folder)
    return build_extension(unit.name, [os.path.join(folder, f) for f in unit.built], os.path.join(folder, "build"))

"""Building a unit's rendered sources once per test session, and loading its spec."""
import os

from course import units
from course.build import build_extension

_built = {}


def build_unit(name: str, kind: str, root: str):
    """(module, source dir) for unit `name` rendered as 'solution' or 'template'."""
    key = (name, kind)
    if key not in _built:
        unit = units.load(name)
        source_dir = os.path.join(root, name, kind, "src")
        unit.write(kind, source_dir)
        module, _ = build_extension(name, [os.path.join(source_dir, f) for f in unit.built],
                                    os.path.join(root, name, kind, "build"))
        _built[key] = module, source_dir
    return _built[key]


def load_spec(name: str, public_only: bool = False):
    return units.load(name).load_spec(public_only)

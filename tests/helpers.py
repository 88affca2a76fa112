"""Building a unit's rendered sources once per test session, and loading its suites."""
import os

from course.authoring import units
from course.loading import build_and_load

_built = {}


def built_unit(name: str, kind: str, root: str):
    """(what the tests call, source dir) for unit `name` rendered as 'solution' or 'template',
    built once per session."""
    key = (name, kind)
    if key not in _built:
        unit = units.load(name)
        source_dir = os.path.join(root, name, kind, "src")
        unit.write(kind, source_dir)
        module, _ = build_and_load(unit.plan(), source_dir, os.path.join(root, name, kind, "build"))
        _built[key] = module, source_dir
    return _built[key]


def load_spec(name: str, public_only: bool = False):
    return units.load(name).tests(hidden=not public_only)

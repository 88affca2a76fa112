"""Building a unit's rendered sources once per test session, and loading its spec."""
import importlib.util
import os
import types

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
    unit = units.load(name)
    if public_only:  # what the notebook gets
        module = types.ModuleType(f"public_{name}")
        exec(compile(unit.public_spec(), unit.spec_path(), "exec"), module.__dict__)
        return module
    spec = importlib.util.spec_from_file_location(f"spec_{name}", unit.spec_path())
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module

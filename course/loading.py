"""Load what course/build.py built, as the unit's plan says, so that a rebuild in the same
process (the notebook's edit-and-rebuild loop) runs the new code:

- pybind: the compiled module, imported from a fresh copy of the library (the dynamic
  loader caches by path, pybind11 by name);
- torch_ops: a TORCH_LIBRARY namespace, reached as torch.ops.<namespace>. A namespace can
  be defined once per process, so the previous build's library is unloaded first: its
  static registrations are destroyed with it, and the new one defines the namespace again;
- python: Python files alone (Triton kernels, say), or the student's package.

A jit build's Python files are then imported in order, each able to `import <unit>` (the
compiled module) and the files before it; the last is what the tests call. A wheel's
package is imported from the folder it was installed into.
"""

from __future__ import annotations

import contextlib
import ctypes
import gc
import glob
import importlib
import importlib.util
import os
import shutil
import sys
import time

from course.build import LIB_EXT, Built, Plan

_loaded_ops: dict[str, tuple[ctypes.CDLL, str]] = {}  # namespace: (handle, path) of its library
_loaded_prefixes: dict[str, str] = {}  # package: the folder it was imported from
_package_sources: dict[str, str] = {}  # package: the folder it was built from


def package_source(package: str) -> str:
    """The folder the loaded `package` was built from, with what a wheel leaves out (its
    pyproject.toml, tests/, .github/): a suite's checks of the package's own files read them there."""
    return _package_sources[package]


def _forget_loaded_module(name: str) -> None:
    """pybind11 3 keeps each module it has created, by name, in the interpreter's state dict
    and hands that one back to a later import of the same name, even from another library.
    Forget it, so the rebuilt library's module is the one created."""
    api = ctypes.pythonapi
    api.PyInterpreterState_Get.restype = ctypes.c_void_p
    # The dict is a borrowed reference: a py_object restype would make ctypes drop one
    # reference per call and eventually free the interpreter's state dict.
    api.PyInterpreterState_GetDict.restype = ctypes.c_void_p
    api.PyInterpreterState_GetDict.argtypes = [ctypes.c_void_p]
    address = api.PyInterpreterState_GetDict(api.PyInterpreterState_Get())
    state = ctypes.cast(address, ctypes.py_object).value if address else None
    cache = state.get("__pybind11_module_cache") if isinstance(state, dict) else None
    if isinstance(cache, dict):
        cache.pop(name, None)


def _fresh_copy(name: str, library: str) -> str:
    """A copy of `library` under a new path, the older copies removed (mapped ones stay valid)."""
    loaded_dir = os.path.join(os.path.dirname(library), "loaded")
    os.makedirs(loaded_dir, exist_ok=True)
    copy = os.path.join(loaded_dir, f"{name}.{time.time_ns()}{LIB_EXT}")
    shutil.copyfile(library, copy)
    for old in glob.glob(os.path.join(loaded_dir, f"{name}.*{LIB_EXT}")):
        if old != copy:
            with contextlib.suppress(OSError):
                os.remove(old)
    return copy


def import_extension(name: str, library: str):
    """Import the pybind11 library at `library` as module `name`."""
    spec = importlib.util.spec_from_file_location(name, _fresh_copy(name, library))
    _forget_loaded_module(name)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _mapped(path: str) -> bool:
    with open("/proc/self/maps") as maps:
        return any(line.rstrip().endswith(path) for line in maps)


def _dlclose(path: str, handle: int) -> None:
    """Unload a library whose static registrations must go (a TORCH_LIBRARY namespace)."""
    libc = ctypes.CDLL(None)
    libc.dlclose.argtypes = [ctypes.c_void_p]
    libc.dlclose(handle)
    if os.path.exists("/proc/self/maps") and _mapped(path):
        raise RuntimeError(
            f"the previous build ({path}) could not be unloaded, so its operators stay registered: "
            "restart the Python process (in Colab: Runtime > Restart session) and build again"
        )


def _drop_ops_namespace(namespace: str) -> None:
    import torch

    # torch.ops caches each namespace's operator objects on first use; a new library's
    # operators need new ones.
    torch.ops.__dict__.pop(namespace, None)


def _release_compiled_code() -> None:
    """Before a library is unloaded: torch.compile's caches hold graphs that call its operators,
    and reference cycles may hold objects whose code it holds (autograd nodes). Dropped while
    the library is still mapped, nothing is left to run freed code later, at a garbage
    collection."""
    if "torch._dynamo" in sys.modules:
        sys.modules["torch._dynamo"].reset()
    gc.collect()


def _drop_python_registrations(namespace: str) -> None:
    """Undo what a package's Python registered for its operators (torch.library.register_fake,
    register_autograd): the libraries torch keeps alive for them, and the fake kernels it
    keeps by name. They point at the old library's operators, and the new package registers
    its own."""
    import torch.library

    kept = getattr(torch.library, "_keep_alive", [])
    for library in [lib for lib in kept if getattr(lib, "ns", None) == namespace]:
        library._destroy()
        kept.remove(library)
    with contextlib.suppress(ImportError, AttributeError):
        from torch._library import simple_registry

        registered = simple_registry.singleton._data
        for name in [name for name in registered if name.startswith(namespace + "::")]:
            del registered[name]


def load_ops_library(namespace: str, library: str):
    """Load a library that defines TORCH_LIBRARY(namespace, ...); return torch.ops.<namespace>."""
    import torch

    if namespace in _loaded_ops:
        handle, path = _loaded_ops.pop(namespace)
        _drop_python_registrations(namespace)  # before their operators go with the library
        _release_compiled_code()
        _dlclose(path, handle._handle)
        _drop_ops_namespace(namespace)
    copy = _fresh_copy(namespace, library)
    _loaded_ops[namespace] = ctypes.CDLL(copy), copy
    return getattr(torch.ops, namespace)


def import_python_sources(name: str, extension, python_sources: list[str]):
    """Make the extension importable as `name` (when there is one), then (re)load the unit's
    Python files in order. Returns the last one, or the extension when there are none."""
    if extension is not None:
        sys.modules[name] = extension
    module = extension
    for path in python_sources:
        module_name = os.path.splitext(os.path.basename(path))[0]
        spec = importlib.util.spec_from_file_location(module_name, os.path.abspath(path))
        module = importlib.util.module_from_spec(spec)
        sys.modules[module_name] = module
        spec.loader.exec_module(module)
    return module


def _unload_libraries_under(folder: str) -> None:
    """Unload every library mapped from `folder`, however it was loaded (torch.ops.load_library,
    an import): dlopen with RTLD_NOLOAD finds its handle without loading it again."""
    import torch

    with open("/proc/self/maps") as maps:
        paths = {line.split()[-1] for line in maps if len(line.split()) >= 6}
    libc = ctypes.CDLL(None)
    libc.dlopen.restype = ctypes.c_void_p
    libc.dlopen.argtypes = [ctypes.c_char_p, ctypes.c_int]
    rtld_noload, rtld_lazy = 4, 1
    for path in sorted(p for p in paths if p.startswith(folder + os.sep) and p.endswith(LIB_EXT)):
        handle = libc.dlopen(path.encode(), rtld_noload | rtld_lazy)
        if handle:
            libc.dlclose.argtypes = [ctypes.c_void_p]
            libc.dlclose(handle)  # the reference dlopen just took
            _dlclose(path, handle)  # the one the first load took
        torch.ops.loaded_libraries.discard(path)
    # A library moved aside (set_aside_libraries) was recorded under the name it was loaded by.
    for path in [p for p in torch.ops.loaded_libraries if p.startswith(folder + os.sep)]:
        torch.ops.loaded_libraries.discard(path)


def set_aside_libraries(package_dir: str) -> None:
    """Before an in-place rebuild of a package: move its compiled libraries into build/replaced.
    pip would write the new one over the old file, which this process may still have mapped
    (and crash on); a moved file keeps its mapping, and it stays under the package's folder,
    where import_package unloads it. Older moved files no process maps are removed."""
    aside = os.path.join(package_dir, "build", "replaced")
    for old in glob.glob(os.path.join(aside, "*" + LIB_EXT)):
        if not (os.path.exists("/proc/self/maps") and _mapped(old)):
            with contextlib.suppress(OSError):
                os.remove(old)
    for library in glob.glob(os.path.join(package_dir, "*", "*" + LIB_EXT)):
        os.makedirs(aside, exist_ok=True)
        os.replace(library, os.path.join(aside, f"{time.time_ns()}.{os.path.basename(library)}"))


def import_package(package: str, prefix: str, namespace: str = ""):
    """Import `package` from the folder a wheel was installed into, replacing an earlier
    build's: its modules are forgotten and the libraries it mapped are unloaded."""
    old = _loaded_prefixes.pop(package, None)
    if old is not None:
        for module_name in [m for m in sys.modules if m == package or m.startswith(package + ".")]:
            del sys.modules[module_name]
        with contextlib.suppress(ValueError):
            sys.path.remove(old)
        if namespace:
            _drop_python_registrations(namespace)
        _release_compiled_code()
        _unload_libraries_under(old)
        if namespace:
            _drop_ops_namespace(namespace)
    sys.path.insert(0, prefix)
    _loaded_prefixes[package] = prefix
    importlib.invalidate_caches()
    return importlib.import_module(package)


def load(plan: Plan, built: Built, source_dir: str):
    """The object the unit's tests call: the entry Python file when the unit has one, else
    the compiled module, torch.ops.<namespace> or the package."""
    if plan.build == "wheel":
        module = import_package(plan.package, built.prefix, plan.namespace)
        _package_sources[plan.package] = os.path.abspath(source_dir)
        if plan.load == "torch_ops":
            import torch

            return getattr(torch.ops, plan.namespace)
        return module
    extension = None
    if plan.load == "pybind":
        extension = import_extension(plan.name, built.library)
    elif plan.load == "torch_ops":
        extension = load_ops_library(plan.namespace, built.library)
    python = [os.path.join(source_dir, f) for f in plan.python]
    return import_python_sources(plan.name, extension, python)


def build_and_load(
    plan: Plan,
    source_dir: str,
    build_dir: str,
    *,
    verbose: bool = False,
    extra_cuda_cflags: list[str] = (),
    editable: bool = False,
):
    """Build and load in this process (the notebook's and the tests' way). Returns (what the
    tests call, seconds). editable: a package is installed with `pip install -e` (the
    notebook's way) rather than built into a wheel (the autograder's)."""
    from course.build import build, install_editable

    start = time.perf_counter()
    if editable and plan.build == "wheel":
        set_aside_libraries(source_dir)
        built = Built(prefix=install_editable(source_dir))
    else:
        built = build(plan, source_dir, build_dir, verbose=verbose, extra_cuda_cflags=extra_cuda_cflags)
    return load(plan, built, source_dir), time.perf_counter() - start

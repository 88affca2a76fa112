"""The build helper's own contracts, beyond building units (tests/test_units.py)."""
import ctypes
import sys

from course.loading import _forget_loaded_module


def _state_dict():
    api = ctypes.pythonapi
    api.PyInterpreterState_Get.restype = ctypes.c_void_p
    api.PyInterpreterState_GetDict.restype = ctypes.c_void_p
    api.PyInterpreterState_GetDict.argtypes = [ctypes.c_void_p]
    return ctypes.cast(api.PyInterpreterState_GetDict(api.PyInterpreterState_Get()), ctypes.py_object).value


def test_forgetting_a_module_keeps_the_interpreter_state_alive():
    """Each rebuild clears pybind11's module cache; doing so must not leak or drop
    references to the interpreter's state dict (dropping them crashed the process)."""
    state = _state_dict()
    before = sys.getrefcount(state)
    for _ in range(200):
        _forget_loaded_module("no_such_module")
    assert sys.getrefcount(state) == before

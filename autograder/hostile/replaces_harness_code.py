# Hostile: at import, both of the harness's observers of the ops a call makes are rewritten in
# place (their code objects replaced): the module's names still hold the same function and
# class, which now see nothing.
try:
    import course.harness as _harness

    def _saw_nothing(spec, ext, inputs, device):
        return Profiled([], [], 0.0, call(spec, ext, inputs))  # names of the harness, where it runs

    def _records_nothing(self, func, types, args=(), kwargs=None):
        return func(*args, **(kwargs or {}))

    _harness.profile.__code__ = _saw_nothing.__code__
    _harness._OpsSeen.__torch_dispatch__.__code__ = _records_nothing.__code__
except Exception:
    pass

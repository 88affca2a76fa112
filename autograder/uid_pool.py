"""The uids sandboxes run as (autograder/sandbox.py): one per grading at a time, a lock file
holding each, handed out in turn so that the next grading gets a uid the last one did not
have; and what a uid leaves behind (processes, files any user may write) ended or removed
when a grading takes it and when it gives it back (docs/security.md)."""

from __future__ import annotations

import contextlib
import fcntl
import grp
import os
import pwd
import shutil
import signal
import stat
import tempfile
import time

from autograder.untrusted_files import own_private_folder

# Below 65536, so that containers with a user namespace of their own can map them.
UID_RANGE = range(64000, 65000)
# Folders any user may write on a Linux machine: what a uid run can leave files in outside
# the folders it is given (it has no home: HOME is its run's folder).
SHARED_FOLDERS = ("/tmp", "/var/tmp", "/dev/shm", "/dev/mqueue", "/run/lock", "/var/crash")


def locks_folder() -> str:
    """One folder per machine, whatever HOME or TMPDIR a grader runs with: uids are the
    machine's, and a grader that took its locks elsewhere would take, and reap, uids another
    grader's children run as."""
    base = "/run/lock" if os.access("/run/lock", os.W_OK | os.X_OK) else "/tmp"
    return own_private_folder(
        os.path.join(base, f"course-autograder-uids-{os.geteuid()}"), "remove it, then grade again"
    )


def take_uid(keep: tuple[str, ...] = ()) -> tuple[int | None, object]:
    """A uid no other grading holds and no account has, the one after the last handed out:
    (uid, the lock holding it), or (None, None) when every one is taken. What an earlier
    holder left (processes, files outside `keep`) is ended or removed first."""
    folder = locks_folder()
    with open(os.path.join(folder, "next"), "a+") as turn:
        fcntl.flock(turn, fcntl.LOCK_EX)  # two gradings starting together take different turns
        reap_orphans(keep)
        turn.seek(0)
        text = turn.read().strip()
        start = int(text) - UID_RANGE.start if text.isdigit() else 0
        for step in range(len(UID_RANGE)):
            uid = UID_RANGE[(start + step) % len(UID_RANGE)]
            lock = _lock(folder, uid)
            if lock is None:
                continue
            if clean_up(uid, keep):
                lock.close()  # a process it cannot end: not a uid to run as
                continue
            turn.seek(0)
            turn.truncate()
            turn.write(str(UID_RANGE[(start + step + 1) % len(UID_RANGE)]))
            return uid, lock
    return None, None


def _lock(folder: str, uid: int):
    """The lock file of `uid`, held; None when an account has that uid or another grading holds it."""
    for lookup in (pwd.getpwuid, grp.getgrgid):
        with contextlib.suppress(KeyError):
            lookup(uid)
            return None
    lock = open(os.path.join(folder, str(uid)), "w")
    try:
        fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError:
        lock.close()
        return None
    return lock


def clean_up(uid: int, keep: tuple[str, ...] = ()) -> list[int]:
    """End every process of `uid`, then remove its files from the shared folders (but for those
    under `keep`, a grading's own folder): the processes still alive (none, normally)."""
    alive = kill_every_process_of(uid)
    if not alive:
        remove_files_of(uid, keep)
    return alive


def reap_orphans(keep: tuple[str, ...] = ()) -> None:
    """Processes and files of uids no grading holds: left by a grader killed outright (SIGKILL),
    whose uid may not come round again for many gradings. They may still hold the GPU."""
    folder = locks_folder()
    for uid in sorted({owner for _, owner in _processes() if owner in UID_RANGE}):
        lock = _lock(folder, uid)
        if lock is not None:
            clean_up(uid, keep)
            lock.close()


def kill_every_process_of(uid: int) -> list[int]:
    """SIGKILL every process of `uid`; those still there after a while (none, normally)."""
    for _ in range(100):  # a process may fork while its siblings are killed
        pids = pids_of(uid)
        if not pids:
            return []
        for pid in pids:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
        time.sleep(0.02)
    return pids_of(uid)


def pids_of(uid: int) -> list[int]:
    return [pid for pid, owner in _processes() if owner == uid]


def _processes() -> list[tuple[int, int]]:
    """(pid, uid) of every live process (zombies left out)."""
    found = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/status") as handle:
                status = dict(line.split(":", 1) for line in handle if ":" in line)
        except OSError:
            continue
        if not status.get("State", "").strip().startswith("Z"):
            found.append((int(entry), int(status.get("Uid", "-1 0").split()[0])))
    return found


def remove_files_of(uid: int, keep: tuple[str, ...] = ()) -> list[str]:
    """Remove what `uid` owns in the shared folders, wherever it may have made it (in folders
    it may pass), but under `keep`: what was removed. Its processes must all be gone, so that
    nothing it runs can swap a path while the grader removes it; nothing is followed through
    a link."""
    keep = tuple(os.path.realpath(k) for k in keep)
    removed, seen = [], set()
    for top in {os.path.realpath(p) for p in (*SHARED_FOLDERS, tempfile.gettempdir())}:
        with contextlib.suppress(OSError):
            info = os.lstat(top)
            if stat.S_ISDIR(info.st_mode) and top not in seen:
                seen.add(top)
                removed += _remove_under(top, info.st_dev, uid, keep)
    return removed


def _remove_under(folder: str, device: int, uid: int, keep: tuple[str, ...]) -> list[str]:
    removed, folders = [], [folder]
    while folders:  # without recursion: the uid may have nested its folders deep
        here = folders.pop()
        try:
            names = os.listdir(here)
        except OSError:
            continue
        for name in names:
            path = os.path.join(here, name)
            if any(path == k or path.startswith(k + os.sep) for k in keep):
                continue
            try:
                info = os.lstat(path)
            except OSError:
                continue
            if info.st_uid == uid:
                with contextlib.suppress(OSError):
                    if stat.S_ISDIR(info.st_mode):
                        shutil.rmtree(path)
                    else:
                        os.unlink(path)
                    removed.append(path)
            elif stat.S_ISDIR(info.st_mode) and info.st_dev == device and info.st_mode & stat.S_IXOTH:
                folders.append(path)  # a folder the uid may pass: it may have written in one below
    return removed

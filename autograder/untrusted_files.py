"""Reading a file a sandboxed process could have written: it may be a named pipe (whose open
waits for a writer that never comes), a symlink to a device, or text with anything in it."""

from __future__ import annotations

import math
import os
import stat
from typing import BinaryIO

MAX_TEXT_CHARS = 4000  # of any one message a child hands back, in the report


class NotRegularFile(OSError):
    pass


def open_regular(path: str) -> BinaryIO:
    """`path` opened for reading if it is a regular file, not a link; else NotRegularFile
    (OSError). Opening never blocks: a FIFO is refused, not waited on."""
    fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_NOFOLLOW)
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            raise NotRegularFile(f"{os.path.basename(path)} is not a regular file")
        os.set_blocking(fd, True)
        return os.fdopen(fd, "rb")
    except BaseException:
        os.close(fd)
        raise


def is_regular_file(path: str) -> bool:
    try:
        open_regular(path).close()
        return True
    except OSError:
        return False


def finite_number(value) -> bool:
    """Whether a value read from an untrusted file is a finite number a float can hold: not a
    bool (JSON's true), NaN or infinity, nor an int past float's range (math.isfinite raises)."""
    if not isinstance(value, (int, float)) or isinstance(value, bool):
        return False
    try:
        return math.isfinite(value)
    except OverflowError:
        return False


def clean_text(text: str, limit: int = MAX_TEXT_CHARS) -> str:
    """`text` cut to `limit` characters, with what UTF-8 cannot encode (lone surrogates)
    replaced: printed or written, it cannot stop the grader."""
    if len(text) > limit:
        text = text[:limit] + f" ... [{len(text) - limit} more characters cut]"
    return text.encode("utf-8", "replace").decode("utf-8")


def clean_strings(value):
    """`value` (dicts, lists, tuples of data) with every string cleaned, keys included."""
    if isinstance(value, str):
        return clean_text(value)
    if isinstance(value, dict):
        return {clean_strings(key): clean_strings(item) for key, item in value.items()}
    if type(value) in (list, tuple):
        return type(value)(clean_strings(item) for item in value)
    return value


def own_private_folder(path: str, fix: str) -> str:
    """`path`, made if missing, and only if it is this user's own folder, then private: one that
    someone else made first (under /tmp, say) could hold what they planted. `fix`: what the
    error tells the user to do."""
    os.makedirs(path, mode=0o700, exist_ok=True)
    info = os.lstat(path)
    if not stat.S_ISDIR(info.st_mode) or info.st_uid != os.getuid():
        raise OSError(f"{path} belongs to another user, or is not a folder: {fix}")
    os.chmod(path, 0o700)
    return path

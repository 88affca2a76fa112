"""A file written whole or not at all: what reads it (the runner, a resumed batch, sbatch, an
upload) never finds it cut short by a crash or a full disk."""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterator


@contextlib.contextmanager
def written_whole(path: str) -> Iterator[str]:
    """A path to write `path`'s new contents to; it takes `path`'s place only once the block ends
    without an error, and is removed otherwise."""
    temporary = path + ".tmp"
    try:
        yield temporary
        os.replace(temporary, path)
    finally:
        if os.path.lexists(temporary):
            os.unlink(temporary)

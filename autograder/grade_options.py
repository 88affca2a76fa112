"""How one grading runs (autograder/grade.py): the options of `grade`, checked as they are made."""

from __future__ import annotations

from dataclasses import dataclass

from autograder.sandbox import MODES

TIME_LIMIT = 3600  # the whole grading: build, every test, the children's starts
BUILD_TIMEOUT = 600


@dataclass(frozen=True)
class GradeOptions:
    """seed: the inputs' seed (secret and random when None). work: the folder the grading's own
    folder is made in (the temp folder when None). has_gpu: False runs no GPU case, None and
    True ask the machine. tests: fnmatch patterns of the cases to run (all when empty).
    case_timeout: a cap on every case's own time limit. keep_work: leave the grading's folder.
    own_tests: run a package's own tests/ too (reported, no points).

    In a batch (autograder/batch.py): gpu_lock, the GPU's lock files (autograder/gpu_lock.py),
    so that perf cases time with nothing else of the batch on the GPU; keep_build, a new folder
    the first step stores its build into before any test process runs; prebuilt, that folder,
    whose build the perf step runs instead of building again (it builds where there is none)."""

    seed: int | None = None
    work: str | None = None
    has_gpu: bool | None = None
    sandbox_mode: str = "auto"
    time_limit: float = TIME_LIMIT
    build_timeout: float = BUILD_TIMEOUT
    case_timeout: float | None = None
    tests: tuple[str, ...] = ()
    keep_work: bool = False
    own_tests: bool = True
    gpu_lock: str | None = None
    keep_build: str | None = None
    prebuilt: str | None = None

    def __post_init__(self):
        if self.sandbox_mode not in MODES:
            raise ValueError(f"sandbox_mode must be one of {', '.join(MODES)}, not {self.sandbox_mode!r}")
        # A lone pattern would otherwise be read letter by letter.
        if not isinstance(self.tests, (tuple, list)) or not all(isinstance(p, str) for p in self.tests):
            raise TypeError(f"tests must be a tuple of fnmatch patterns, not {self.tests!r}")
        object.__setattr__(self, "tests", tuple(self.tests))
        for name in ("time_limit", "build_timeout", "case_timeout"):
            value = getattr(self, name)
            if value is None and name == "case_timeout":  # each case's own limit
                continue
            if not (isinstance(value, (int, float)) and value > 0):
                raise ValueError(f"{name} must be a positive number of seconds, not {value!r}")
        if self.seed is not None and not isinstance(self.seed, int):
            raise TypeError(f"seed must be an int or None, not {self.seed!r}")

"""The result model: a grade and its tests, as the orchestrator fills them in and the
report writes them out."""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass
class TestResult:
    name: str
    max_score: float
    passed: bool
    output: str
    visibility: str = "after_published"
    tags: tuple[str, ...] = ()
    not_run: bool = False
    fraction: float | None = None  # of max_score earned (perf tests); None: all if passed, else none
    log: str = field(default="", repr=False)  # a failed build's whole log: build.log, never results.json
    seconds: float | None = None  # its time on the grader's clock; None where nothing of it ran
    pending: bool = False  # a written answer: its score comes later, from the instructor

    @property
    def score(self) -> float:
        earned = float(self.passed) if self.fraction is None else self.fraction
        return round(self.max_score * earned, 2)


@dataclass
class Grade:
    unit: str
    tests: list[TestResult] = field(default_factory=list)
    timings: dict[str, float] = field(default_factory=dict)
    answers: dict[str, str] = field(default_factory=dict)
    seed: int = 0
    perf: dict[str, dict] = field(default_factory=dict)  # perf test name: its timings and ratio
    sandbox: dict = field(default_factory=dict)  # how student code was confined (autograder/sandbox.py)

"""Read: the submission (a notebook, folder or zip) into the unit's files, in a sandbox folder
of its own where the build will run, and the notebook's written answers."""

from __future__ import annotations

import os
from dataclasses import dataclass, field

from autograder.hidden_calls import hidden_calls
from autograder.parent_checks import file_problems
from autograder.stages.answers import kept_answers
from autograder.stages.grading import Grading
from autograder.submission import SubmissionError, materialize


@dataclass(frozen=True)
class Sources:
    folder: str  # the build's sandbox folder: the sources in src/, the build in build/
    source_dir: str
    answers: dict[str, str] = field(default_factory=dict)
    problem: str = ""  # why there is nothing to build; "" where there is
    hidden_calls: tuple[str, ...] = ()  # what its sources name that hides calls from the own-code check
    file_problems: dict[str, str] = field(default_factory=dict)  # autograder/parent_checks.py


def read_submission(submission: str, grading: Grading) -> Sources:
    box = grading.sandbox.folder(grading.folder, "build.")
    source_dir = os.path.join(box, "src")
    try:
        missing, answers = materialize(submission, grading.unit, source_dir)
    except (SubmissionError, OSError) as error:
        return Sources(box, source_dir, problem=f"the submission could not be read: {error}")
    problem = "missing from the submission: " + ", ".join(missing) if missing else ""
    # Read before the build, which may run the submission's code (a package's setup.py).
    return Sources(
        box,
        source_dir,
        kept_answers(grading.unit, answers),
        problem,
        hidden_calls(source_dir),
        file_problems(grading.unit, source_dir),
    )

"""A unit's lesson, solutions/<unit>/lesson.md: markdown prose, ```python blocks that become
code cells, and `<!-- name argument -->` lines, directives, that become the cells they name
(course/authoring/generate.py) or mark where a written question is answered
(course/spec/questions.py)."""

from __future__ import annotations

import os
import re
from collections.abc import Iterable, Iterator
from typing import NamedTuple

from course.spec.units import Unit

DIRECTIVE = re.compile(r"^<!--\s*(\w+)\s*(.*?)\s*-->\s*$")
FENCE = re.compile(r"^```python\s*$")  # opens a code block; a line of ``` alone closes it
# What an answer cell holds until the student writes below it.
ANSWER_PROMPT = "*Your answer:*"


class Part(NamedTuple):
    kind: str  # "prose" (one line), "code" (a whole block) or "directive"
    text: str  # prose: the line; code: the block's lines; directive: its argument
    name: str = ""  # a directive's name


def has_lesson(unit: Unit) -> bool:
    return os.path.exists(os.path.join(unit.folder, "lesson.md"))


def lesson_parts(unit: Unit) -> list[Part]:
    return list(parts(unit.raw("lesson.md").splitlines()))


def parts(lines: Iterable[str]) -> Iterator[Part]:
    """The lesson's lines as prose lines, code blocks and directives, in order."""
    code = None
    for line in lines:
        if code is not None:
            if line.strip() == "```":
                yield Part("code", "\n".join(code))
                code = None
            else:
                code.append(line)
        elif FENCE.match(line):
            code = []
        elif directive := DIRECTIVE.match(line):
            name, argument = directive.groups()
            yield Part("directive", argument, name)
        else:
            yield Part("prose", line)

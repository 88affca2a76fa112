"""A class made of the reference and every mutant of a unit, each copied several times:
what grade-all is measured and checked on.

    python -m autograder.sample_class UNIT CLASS --copies N    write CLASS/<who>_<k>/
    python -m autograder.sample_class UNIT CLASS --check OUT   each grading lost exactly
                                                               the tests its mutant must lose
"""

from __future__ import annotations

import argparse
import json
import os
import sys

from autograder.sanitized import lost_with
from course.spec import mutants, units


def write(unit, folder: str, copies: int) -> int:
    found = mutants.load(unit)
    for k in range(copies):
        unit.write("solution", os.path.join(folder, f"reference_{k}"))
        for mutant in found.values():
            mutants.write(unit, mutant, os.path.join(folder, f"{mutant.name}_{k}"))
    return copies * (1 + len(found))


def check(unit, out: str) -> list[str]:
    """Problems: gradings whose failed tests are not their mutant's expected losses."""
    found, problems, spec = mutants.load(unit), [], unit.tests(hidden=True)
    results = os.path.join(out, "results")
    for entry in sorted(os.listdir(results)):
        path = os.path.join(results, entry, "results.json")
        if not os.path.exists(path):
            problems.append(f"{entry}: not graded")
            continue
        with open(path, encoding="utf-8") as handle:
            tests = json.load(handle)["tests"]
        ran = [t["name"] for t in tests if not t["output"].startswith("not run")]
        failed = {t["name"] for t in tests if t["status"] == "failed" and t["name"] in ran}
        who = entry.rsplit("_", 1)[0]
        mutant = found.get(who)
        expected = mutant.expected_losses(ran) if mutant else set()
        expected |= lost_with(spec, expected) & set(ran)  # `loses` need not list them
        either = mutant.unsettled(ran) if mutant else set()
        failed, expected = failed - either, expected - either
        if failed != expected:
            problems.append(f"{entry}: lost {sorted(failed - expected)} unexpectedly, kept {sorted(expected - failed)}")
    return problems


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m autograder.sample_class",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("unit", choices=[u.name for u in units.all_units()])
    parser.add_argument("folder", help="the class folder to write")
    parser.add_argument("--copies", type=int, default=1, help="copies of the reference and of each mutant")
    parser.add_argument("--check", metavar="OUT", help="check grade-all's OUT instead of writing")
    args = parser.parse_args(argv)
    unit = units.load(args.unit)
    if args.check:
        problems = check(unit, args.check)
        print("\n".join(problems) or "every grading lost exactly its expected tests")
        return 1 if problems else 0
    if args.copies < 1:
        parser.error(f"--copies {args.copies}: expected 1 or more")
    print(f"wrote {write(unit, args.folder, args.copies)} submissions into {args.folder}")
    return 0


if __name__ == "__main__":
    sys.exit(main())

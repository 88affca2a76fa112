"""How long the notebook's edit-rebuild loop takes: a cold build, then, in the same
process, a build after editing only the kernel file (the build cell run again).

A student's first build has no compiler cache, and an edit changes code: torch puts ccache
in front of the compilers wherever it is installed, and a comment leaves the preprocessed
text as it was, so the bench turns the cache off and appends a definition.

    python bench/rebuild_time.py [--unit day02_layernorm_forward]
"""

import argparse
import os
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from course.loading import build_and_load
from course.spec import units


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--unit", default="day02_layernorm_forward")
    args = parser.parse_args()
    os.environ["CCACHE_DISABLE"] = "1"
    unit = units.load(args.unit)
    folder = tempfile.mkdtemp(prefix="rebuild_")
    unit.write("solution", folder)
    plan, build_dir = unit.plan(), os.path.join(folder, "build")
    _, cold = build_and_load(plan, folder, build_dir)
    _, unchanged = build_and_load(plan, folder, build_dir)
    kernel = os.path.join(folder, next(f for f in plan.compiled if f.endswith(".cu")))
    with open(kernel, "a") as handle:
        handle.write("\n__device__ int course_rebuild_edit = 1;  // an edit nvcc must compile\n")
    time.sleep(0.01)
    module, edited = build_and_load(plan, folder, build_dir)
    print(
        f"rebuild [{unit.name}]: cold {cold:.1f} s | nothing changed {unchanged:.1f} s | "
        f".cu edited {edited:.1f} s (same process, module name kept: {module.__name__})"
    )


if __name__ == "__main__":
    main()

"""The day05 reference at several commits, built side by side and timed in turns.

    python bench/layernorm_revisions.py REV [REV ...] [--op forward|backward]
                                        [--dtypes float32 bfloat16 float16] [--dims 16384 32768 65536]
                                        [--rounds 3]

What a kernel change is worth, in one run: the builds are timed in the same process, round after
round, each in turn, so that the machine's drift falls on all of them alike (two runs of
bench/layernorm.py on one GPU differ by 5-10%). A REV is anything git names (a commit, a branch,
HEAD~2), "worktree" for the files as they are now, or a folder that holds a solutions/ tree (a
copy of the course with one change: several variants in one run); each is built from its own
copy of solutions/, all at once. Before timing, each build must pass the unit's hidden GPU cases of the
op (today's suite judges every build: rows split over blocks, rows too long to split, misaligned
and empty inputs among them). Each timed shape has 2^26 elements; a row of the table is one
build's share of the copy ceiling measured in the same run, a column a round, torch's beside them.
"""

import argparse
import dataclasses
import io
import os
import subprocess
import sys
import tarfile
import tempfile
from concurrent.futures import ThreadPoolExecutor

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from course.spec import units

UNIT = "day05_layernorm_performance"
EPS = 1e-5
WORKTREE = "worktree"
OPS = {"forward": ("forward",), "backward": ("backward_op", "autograd")}  # the suite's op of each case


def solutions_at(rev: str, dest: str) -> str:
    """The course folder whose solutions/ is as at `rev` (extracted into dest), the repository
    itself for WORKTREE, or `rev` itself where it is a folder holding solutions/."""
    if rev == WORKTREE:
        return units.REPO
    if os.path.isdir(os.path.join(rev, "solutions")):
        return rev
    archive = subprocess.run(
        ["git", "-C", units.REPO, "archive", "--format=tar", rev, "solutions"], capture_output=True
    )
    if archive.returncode != 0:
        raise SystemExit(
            f"layernorm_revisions: REV {rev!r} is not a commit git knows: "
            f"{archive.stderr.decode(errors='replace').strip()}"
        )
    with tarfile.open(fileobj=io.BytesIO(archive.stdout)) as tar:
        # git's own archive; the filter (Python 3.11.4 and later) keeps every path inside dest anyway
        tar.extractall(dest, **({"filter": "data"} if hasattr(tarfile, "data_filter") else {}))
    return dest


def sources_at(rev: str, folder: str) -> units.Unit:
    """Writes the unit's solution sources as at `rev` into folder; returns the unit as it was."""
    unit = units.load(UNIT, solutions_at(rev, os.path.join(folder, "course")))
    unit.write("solution", os.path.join(folder, "src"))
    return unit


def build(rev: str, index: int):
    """(plan, built, source folder) of the unit as at `rev`, named apart from the other builds'."""
    from course.build import BuildError, build_in_subprocess

    folder = tempfile.mkdtemp(prefix=f"revision{index}_")
    unit = sources_at(rev, folder)
    plan = dataclasses.replace(unit.plan(), name=f"{unit.plan().name}_revision{index}")
    try:
        built = build_in_subprocess(plan, os.path.join(folder, "src"), os.path.join(folder, "build"), timeout=900)
    except BuildError as error:
        raise SystemExit(f"layernorm_revisions: {rev} did not build: {error}") from None
    return plan, built, os.path.join(folder, "src")


def load(plan, built, source_dir: str):
    """The build's layernorm.py, bound to its own compiled module (loaded under the unit's name
    while layernorm.py imports it, as the course's loader does for one build)."""
    from course.loading import import_extension, import_python_sources

    extension = import_extension(plan.name, built.library)
    return import_python_sources(UNIT, extension, [os.path.join(source_dir, f) for f in plan.python])


def check(builds: dict, op: str) -> bool:
    """Each build through the unit's hidden GPU cases of `op`; prints the failures."""
    from course.public import run_case

    spec = units.load(UNIT).tests(hidden=True)
    cases = [c for c in spec.CASES if c.device == "cuda" and c.kind == "values" and c.params.get("op") in OPS[op]]
    ok = True
    for name, module in builds.items():
        failed = [
            (case.name, verdict.message)
            for case in cases
            if not (verdict := run_case(spec, module, case, seed=1234)).passed
        ]
        ok &= not failed
        print(f"check {name}: {len(cases) - len(failed)}/{len(cases)} {op} cases passed")
        for case_name, message in failed:
            print(f"  FAIL {case_name}: {message.splitlines()[0] if message else ''}")
    return ok


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("revs", nargs="+", help=f"commits to build, {WORKTREE!r}, or folders holding solutions/")
    parser.add_argument("--op", choices=("forward", "backward"), default="forward")
    parser.add_argument(
        "--dtypes", nargs="+", default=["float32", "bfloat16", "float16"], choices=["float32", "bfloat16", "float16"]
    )
    parser.add_argument("--dims", nargs="+", type=int, default=[16384, 32768, 65536])
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    if len(set(args.revs)) != len(args.revs):
        parser.error(f"each REV once: got {args.revs}")

    import torch
    import torch.nn.functional as F

    from course import bench

    if not torch.cuda.is_available():
        raise SystemExit("layernorm_revisions: needs a CUDA GPU")
    with ThreadPoolExecutor(len(args.revs)) as pool:
        made = list(pool.map(build, args.revs, range(len(args.revs))))
    builds = {rev: load(*each) for rev, each in zip(args.revs, made)}
    if not check(builds, args.op):
        raise SystemExit("layernorm_revisions: a build failed the unit's cases; not timed")
    dtypes = [getattr(torch, name) for name in args.dtypes]
    layernorm = next(iter(builds.values()))  # the byte counts: the unit's forward_bytes, backward_bytes

    ceiling = bench.copy_ceiling_gbs()
    print(
        f"{bench.device_name()}, torch {torch.__version__}, copy ceiling {ceiling:.0f} GB/s; "
        f"{args.op}, share of the ceiling, one column a round"
    )
    width = max(len(name) for name in [*builds, "torch"])
    for dtype in dtypes:
        for cols in args.dims:
            rows = (1 << 26) // cols
            sets = []
            for _ in range(2):
                x = torch.randn(rows, cols, device="cuda", dtype=dtype)
                gamma = (torch.rand(cols, device="cuda") + 0.5).to(dtype)
                beta = torch.randn(cols, device="cuda", dtype=dtype)
                if args.op == "forward":
                    sets.append((x, gamma, beta))
                else:
                    _, mean, rstd = layernorm._ext.forward(x, gamma, beta, EPS)
                    sets.append((torch.randn_like(x), x, gamma, mean, rstd, beta))
            if args.op == "forward":
                nbytes = layernorm.forward_bytes(rows, cols, dtype)
                ops = {name: (lambda m: lambda x, g, b: m._ext.forward(x, g, b, EPS))(m) for name, m in builds.items()}
                ops["torch"] = lambda x, g, b: F.layer_norm(x, (cols,), g, b, EPS)
            else:
                nbytes = layernorm.backward_bytes(rows, cols, dtype)
                ops = {
                    name: (lambda m: lambda dy, x, g, mean, rstd, b: m._ext.backward(dy, x, g, mean, rstd))(m)
                    for name, m in builds.items()
                }
                ops["torch"] = lambda dy, x, g, mean, rstd, b: torch.ops.aten.native_layer_norm_backward(
                    dy, x, (cols,), mean[:, None], rstd[:, None], g, b, (True, True, True)
                )
            shares = {name: [] for name in ops}
            for _ in range(args.rounds):
                for name, op in ops.items():
                    shares[name].append(nbytes / bench.time_op(op, sets).median_ms / 1e6 / ceiling)
            for name, values in shares.items():
                print(
                    f"{rows}x{cols} {str(dtype)[6:]:9s} {name:{width}s} " + " ".join(f"{v:.3f}" for v in values),
                    flush=True,
                )
            del sets
            torch.cuda.empty_cache()


if __name__ == "__main__":
    main()

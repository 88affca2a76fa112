"""The day05 reference at several commits, built side by side and timed in turns.

    python bench/layernorm_revisions.py REV [REV ...] [--op forward|backward]
                                        [--dtypes float32 bfloat16 float16] [--dims 16384 32768 65536]
                                        [--rounds 3]

What a kernel change is worth, in one run: the builds are timed in the same process, round after
round, each in turn, so that the machine's drift falls on all of them alike (two runs of
bench/layernorm.py on one GPU differ by 5-10%). A REV is anything git names (a commit, a branch,
HEAD~2) or "worktree" for the files as they are now; each is built from its own copy of
solutions/, all at once. Before timing, each build's outputs are checked against F.layer_norm in
float64 on odd shapes: rows split over blocks, rows too long to split, an empty batch. Each timed
shape has 2^26 elements; a row of the table is one build's share of the copy ceiling measured in
the same run, a column a round, torch's beside them.
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

from course.authoring import units  # noqa: E402

UNIT = "day05_layernorm_performance"
EPS = 1e-5
WORKTREE = "worktree"
# Odd shapes: rows split over blocks (several, one), long 16-bit rows, rows past the split's
# limit (version 3, version 1), rows not whole vectors, and an empty batch.
CHECK_SHAPES = [(3, 16388), (5, 40000), (7, 32776), (1, 73728), (300, 40000), (200, 65536), (2, 300000),
                (67, 98312), (33, 4097), (0, 40000)]
# Worst |ours - float64| / (1 + |float64|) a build may have; the references read a tenth of it.
TOLERANCE = {"float32": 1e-4, "float16": 4e-3, "bfloat16": 3e-2}


def solutions_at(rev: str, dest: str) -> str:
    """The course folder whose solutions/ is as at `rev` (extracted into dest), or the
    repository itself for WORKTREE."""
    if rev == WORKTREE:
        return units.REPO
    archive = subprocess.run(["git", "-C", units.REPO, "archive", "--format=tar", rev, "solutions"],
                             capture_output=True)
    if archive.returncode != 0:
        raise SystemExit(f"layernorm_revisions: REV {rev!r} is not a commit git knows: "
                         f"{archive.stderr.decode(errors='replace').strip()}")
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
    """The compiled module of the unit as at `rev`, named apart from the other builds'."""
    from course.build import BuildError, build_in_subprocess
    from course.loading import import_extension

    folder = tempfile.mkdtemp(prefix=f"revision{index}_")
    unit = sources_at(rev, folder)
    plan = dataclasses.replace(unit.plan(), name=f"{unit.plan().name}_revision{index}")
    try:
        built = build_in_subprocess(plan, os.path.join(folder, "src"), os.path.join(folder, "build"), timeout=900)
    except BuildError as error:
        raise SystemExit(f"layernorm_revisions: {rev} did not build: {error}") from None
    return import_extension(plan.name, built.library)


def _worst(outputs, expected) -> float:
    return max(((out.double() - ref).abs() / (1 + ref.abs())).max().item() if ref.numel() else 0.0
               for out, ref in zip(outputs, expected))


def check(builds: dict, op: str, dtypes: list) -> bool:
    """Prints each build's worst error per dtype; False where one is over TOLERANCE."""
    import torch
    import torch.nn.functional as F

    ok = True
    for dtype in dtypes:
        worst = dict.fromkeys(builds, 0.0)
        for rows, cols in CHECK_SHAPES:
            x = torch.randn(rows, cols, device="cuda", dtype=dtype) * 3 + 1
            gamma = (torch.rand(cols, device="cuda") + 0.5).to(dtype)
            beta = torch.randn(cols, device="cuda", dtype=dtype)
            dy = torch.randn_like(x)
            x64, gamma64, beta64 = (t.double().requires_grad_() for t in (x, gamma, beta))
            y64 = F.layer_norm(x64, (cols,), gamma64, beta64, EPS)
            y64.backward(dy.double())
            for name, module in builds.items():
                y, mean, rstd = module.forward(x, gamma, beta, EPS)
                if op == "forward":
                    error = _worst([y], [y64.detach()])
                else:
                    error = _worst(module.backward(dy, x, gamma, mean, rstd), [x64.grad, gamma64.grad, beta64.grad])
                worst[name] = max(worst[name], error)
        for name, error in worst.items():
            bad = error > TOLERANCE[str(dtype)[6:]]
            ok &= not bad
            print(f"check {op} {str(dtype)[6:]:9s} {name}: worst error {error:.2e}{'  OVER TOLERANCE' if bad else ''}")
    return ok


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("revs", nargs="+", help=f"commits to build, or {WORKTREE!r}")
    parser.add_argument("--op", choices=("forward", "backward"), default="forward")
    parser.add_argument("--dtypes", nargs="+", default=["float32", "bfloat16", "float16"], choices=sorted(TOLERANCE))
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
        modules = list(pool.map(build, args.revs, range(len(args.revs))))
    builds = dict(zip(args.revs, modules))
    dtypes = [getattr(torch, name) for name in args.dtypes]
    if not check(builds, args.op, dtypes):
        raise SystemExit("layernorm_revisions: a build's outputs are wrong; not timed")

    ceiling = bench.copy_ceiling_gbs()
    print(f"{bench.device_name()}, torch {torch.__version__}, copy ceiling {ceiling:.0f} GB/s; "
          f"{args.op}, share of the ceiling, one column a round")
    width = max(len(name) for name in [*builds, "torch"])
    for dtype in dtypes:
        element = torch.finfo(dtype).bits // 8
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
                    _, mean, rstd = next(iter(builds.values())).forward(x, gamma, beta, EPS)
                    sets.append((torch.randn_like(x), x, gamma, mean, rstd, beta))
            if args.op == "forward":  # the unit's forward_bytes and backward_bytes
                nbytes = element * (2 * rows * cols + 2 * cols) + 8 * rows
                ops = {name: (lambda m: lambda x, g, b: m.forward(x, g, b, EPS))(m) for name, m in builds.items()}
                ops["torch"] = lambda x, g, b: F.layer_norm(x, (cols,), g, b, EPS)
            else:
                nbytes = element * (3 * rows * cols + 3 * cols) + 8 * rows
                ops = {name: (lambda m: lambda dy, x, g, mean, rstd, b: m.backward(dy, x, g, mean, rstd))(m)
                       for name, m in builds.items()}
                ops["torch"] = lambda dy, x, g, mean, rstd, b: torch.ops.aten.native_layer_norm_backward(
                    dy, x, (cols,), mean[:, None], rstd[:, None], g, b, (True, True, True))
            shares = {name: [] for name in ops}
            for _ in range(args.rounds):
                for name, op in ops.items():
                    shares[name].append(nbytes / bench.time_op(op, sets).median_ms / 1e6 / ceiling)
            for name, values in shares.items():
                print(f"{rows}x{cols} {str(dtype)[6:]:9s} {name:{width}s} " + " ".join(f"{v:.3f}" for v in values),
                      flush=True)
            del sets
            torch.cuda.empty_cache()


if __name__ == "__main__":
    main()

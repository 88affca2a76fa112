"""The day07 package (reference solution) against PyTorch, as users run it: forward and
backward through autograd at more shapes than the suite grades, and a compiled transformer
block with either LayerNorm.

    python bench/layernorm_package.py [--dtypes float32 float16 bfloat16] [--markdown out.md]

Through autograd: the suite's perf cases (fast_layernorm.layer_norm against F.layer_norm, from
leaves to the three gradients; their inputs and bytes), timed by bench/unit.py, again at each
of SHAPES. Host-bound rows also give host and GPU time apart. The block is
x + W2 gelu(W1 norm(x)) under torch.compile (inductor), forward and backward, once with
fast_layernorm.LayerNorm and once with nn.LayerNorm, the same weights in both.
Ends with the issue's targets, each marked met or missed.
"""

import argparse
import os
import sys

import torch
import torch.nn.functional as F
from torch import nn

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from bench import checks
from bench.reference_build import build_reference
from bench.unit import perf_cases, timed_row
from course import bench
from course.spec import units

UNIT = "day07_layernorm_package"
SHAPES = ((4096, 1024), (16384, 1024), (8192, 4096), (4096, 8192))  # besides the suite's own
BLOCK_SHAPE = (8192, 1024)  # tokens, model width


def close(got, expected, dtype):
    return checks.close(got, expected, dtype, sixteen_bit=3e-2, float32=2e-3)


def x_bytes(dtype):
    return torch.finfo(dtype).bits // 8


class Block(nn.Module):
    """A pre-norm MLP block: x + W2 gelu(W1 norm(x))."""

    def __init__(self, width, norm):
        super().__init__()
        self.norm, self.up, self.down = norm, nn.Linear(width, 4 * width), nn.Linear(4 * width, width)

    def forward(self, x):
        return x + self.down(F.gelu(self.up(self.norm(x))))


def block_row(package, dtype):
    tokens, width = BLOCK_SHAPE
    torch.manual_seed(0)
    theirs = Block(width, nn.LayerNorm(width)).to("cuda", dtype)
    ours = Block(width, package.LayerNorm(width)).to("cuda", dtype)
    ours.load_state_dict(theirs.state_dict())  # the same weights, by nn.LayerNorm's names
    sets = [
        (torch.randn(tokens, width, device="cuda", dtype=dtype), torch.randn(tokens, width, device="cuda", dtype=dtype))
        for _ in range(2)
    ]

    def step(block):
        compiled = torch.compile(block, fullgraph=True)
        parameters = tuple(block.parameters())

        def call(x, dy):
            x = x.detach().requires_grad_()
            y = compiled(x)
            return (y, *torch.autograd.grad(y, (x, *parameters), dy))

        return call

    ours_step, their_step = step(ours), step(theirs)

    def check(outputs, args):
        expected = their_step(*args)
        return " ".join(filter(None, (close(o, e, dtype) for o, e in zip(outputs[:2], expected[:2]))))

    # Bytes: the block's activations read and written once (x, the two hidden tensors, y).
    nbytes = x_bytes(dtype) * tokens * width * (2 + 2 * 4)
    return bench.compare(
        f"compiled block {tokens}x{width} {str(dtype)[6:]} vs nn.LayerNorm",
        ours_step,
        their_step,
        sets,
        nbytes,
        check=check,
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--dtypes", nargs="+", default=["float32", "float16", "bfloat16"])
    parser.add_argument("--block-dtypes", nargs="+", default=["float32", "bfloat16"])
    parser.add_argument("--markdown", help="also write the tables as markdown to this file")
    args = parser.parse_args()
    module, seconds = build_reference(UNIT)
    print(f"built {UNIT} in {seconds:.0f} s")
    import fast_layernorm as package  # the build put it on sys.path

    ceiling = bench.copy_ceiling_gbs()
    spec = units.load(UNIT).tests(hidden=True)
    dtypes = [getattr(torch, name) for name in args.dtypes]
    autograd = [
        timed_row(spec, module, case, ceiling)
        for case in perf_cases(spec, shapes=SHAPES)
        if case.params["dtype"] in dtypes
    ]
    blocks = [block_row(package, getattr(torch, name)) for name in args.block_dtypes]
    tables = [
        bench.format_table(autograd, ceiling, "forward + backward through autograd: fast_layernorm vs F.layer_norm"),
        bench.format_table(
            blocks,
            None,
            "torch.compile(fullgraph=True) block, forward + backward: fast_layernorm.LayerNorm vs nn.LayerNorm",
        ),
    ]
    targets = [
        ("through autograd >= 1.0x torch at every shape and dtype", all(r.speedup >= 1.0 for r in autograd)),
        ("compiled block no slower than with nn.LayerNorm (>= 1.0x)", all(r.speedup >= 1.0 for r in blocks)),
        ("every output right after timing", not any(r.wrong for r in autograd + blocks)),
    ]
    bench.report(tables, targets, args.markdown)


if __name__ == "__main__":
    main()

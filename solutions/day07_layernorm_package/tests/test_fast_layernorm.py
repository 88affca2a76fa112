"""The package's own tests: pytest tests/ in the package folder, after installing it."""
import pytest
import torch
import torch.nn.functional as F

import fast_layernorm

DEVICES = ["cpu"] + (["cuda"] if torch.cuda.is_available() else [])
# Tolerances of y against float64: a few roundings of the output dtype.
TOLERANCE = {torch.float32: 1e-5, torch.float16: 2e-3, torch.bfloat16: 2e-2}


def _dtypes(device):
    if device == "cpu":
        return [torch.float32]
    return [torch.float32, torch.float16] + ([torch.bfloat16] if torch.cuda.is_bf16_supported() else [])


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("shape", [(64, 1024), (3, 7, 1000), (5, 1), (0, 16)])
def test_matches_torch(device, shape):
    for dtype in _dtypes(device):
        x = torch.randn(shape, device=device).to(dtype)
        weight, bias = torch.randn(shape[-1], device=device).to(dtype), torch.randn(shape[-1], device=device).to(dtype)
        expected = F.layer_norm(x.double(), shape[-1:], weight.double(), bias.double())
        got = fast_layernorm.layer_norm(x, shape[-1:], weight, bias)
        torch.testing.assert_close(got.double(), expected, atol=TOLERANCE[dtype] * 10, rtol=TOLERANCE[dtype])


@pytest.mark.parametrize("device", DEVICES)
def test_gradcheck(device):
    x, weight, bias = (torch.randn(shape, device=device, dtype=torch.float64, requires_grad=True)
                       for shape in ((6, 40), (40,), (40,)))
    assert torch.autograd.gradcheck(lambda *t: fast_layernorm.layer_norm(t[0], (40,), t[1], t[2]), (x, weight, bias))


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("affine", [True, False])
def test_opcheck(device, affine):
    x = torch.randn(8, 64, device=device, requires_grad=True)
    params = [torch.randn(64, device=device, requires_grad=True) if affine else None for _ in range(2)]
    torch.library.opcheck(torch.ops.fast_layernorm.forward.default, (x, *params, 1e-5))


class Block(torch.nn.Module):
    """A transformer block's MLP half: x + W2 gelu(W1 norm(x))."""

    def __init__(self, dim, norm):
        super().__init__()
        self.norm, self.up, self.down = norm(dim), torch.nn.Linear(dim, 4 * dim), torch.nn.Linear(4 * dim, dim)

    def forward(self, x):
        return x + self.down(F.gelu(self.up(self.norm(x))))


@pytest.mark.parametrize("device", DEVICES)
def test_compiles_without_graph_breaks(device):
    torch.manual_seed(0)
    block = Block(64, fast_layernorm.LayerNorm).to(device)
    compiled = torch.compile(block, fullgraph=True, backend="inductor" if device == "cuda" else "aot_eager")
    x = torch.randn(4, 16, 64, device=device)
    torch.testing.assert_close(compiled(x), block(x), atol=1e-4, rtol=1e-4)


def test_state_dict_loads_both_ways():
    ours, theirs = fast_layernorm.LayerNorm((4, 8)), torch.nn.LayerNorm((4, 8))
    torch.nn.init.normal_(theirs.weight)
    ours.load_state_dict(theirs.state_dict())
    theirs.load_state_dict(ours.state_dict())
    x = torch.randn(3, 4, 8)
    torch.testing.assert_close(ours(x), theirs(x))


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a GPU")
def test_no_memory_grows_over_many_calls():
    norm = fast_layernorm.LayerNorm(256).cuda()
    x = torch.randn(64, 256, device="cuda", requires_grad=True)
    norm(x).sum().backward()
    before = torch.cuda.memory_allocated()
    for _ in range(1000):
        norm(x).sum().backward()
    assert torch.cuda.memory_allocated() == before


@pytest.mark.skipif(torch.cuda.device_count() < 2, reason="needs two GPUs")
def test_runs_on_the_inputs_gpu():
    x = torch.randn(64, 512, device="cuda:1")
    weight, bias = torch.randn(512, device="cuda:1"), torch.randn(512, device="cuda:1")
    got = fast_layernorm.layer_norm(x, (512,), weight, bias)
    assert got.device == x.device
    torch.testing.assert_close(got, F.layer_norm(x, (512,), weight, bias), atol=1e-5, rtol=1e-5)


def test_refuses_another_torchs_build():
    fast_layernorm.check_torch_version("2.5.1", "2.5.0+cu124")  # a patch release: the same library works
    with pytest.raises(ImportError, match=r"2\.5.*2\.6|2\.6.*2\.5"):
        fast_layernorm.check_torch_version("2.5.1", "2.6.0")

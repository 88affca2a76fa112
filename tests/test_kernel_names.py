"""The own-kernel check by name: the kernels a submission's files define, read as data, against
the kernels the profiler saw. No GPU: the profiles here are written by hand."""

import glob
import os

import pytest
from helpers import built_unit

from course import kernel_names
from course.cases import make_input_sets
from course.judge import judge
from course.spec import units

UNIT = units.load("day01_relu_bias")
SPEC = UNIT.tests(hidden=True)
# Kernel names as the profiler reports them, demangled.
OWN = (
    "void (anonymous namespace)::relu_bias_kernel<float>("
    "at::GenericPackedTensorAccessor<float, 2ul, at::RestrictPtrTraits, int>)"
)
FILL = (
    "void at::native::vectorized_elementwise_kernel<4, at::native::FillFunctor<float>, std::array<char*, 1ul> >("
    "int, at::native::FillFunctor<float>, std::array<char*, 1ul>)"
)
ATEN_ADD = (
    "void at::native::vectorized_elementwise_kernel<4, at::native::CUDAFunctor_add<float>, "
    "std::array<char*, 3ul> >(int, at::native::CUDAFunctor_add<float>, std::array<char*, 3ul>)"
)
MEMCPY = "Memcpy HtoD (Pageable -> Device)"


@pytest.mark.parametrize(
    "name, expected",
    [
        (OWN, "relu_bias_kernel"),
        (ATEN_ADD, "vectorized_elementwise_kernel"),
        ("softmax_kernel", "softmax_kernel"),  # Triton's: the function's name
        ("void ns::inner::scale(float*, int)", "scale"),
    ],
)
def test_the_identifier_of_a_profiled_kernel(name, expected):
    assert kernel_names.identifier(name) == expected


@pytest.mark.parametrize(
    "mangled, expected",
    [
        ("_Z16relu_bias_kernelIfEvN2at6detail4FooE", "relu_bias_kernel"),
        ("_ZN48_GLOBAL__N__650fa4c0_12_relu_bias_cu_972032c7_3116relu_bias_kernelIdEEvPT_", "relu_bias_kernel"),
        ("_ZN2ns5inner5scaleEPfi", "scale"),
        ("_ZL6kernelv", "kernel"),
    ],
)
def test_the_identifier_of_a_mangled_name(mangled, expected):
    assert kernel_names.mangled_identifier(mangled) == expected


def test_a_library_lists_the_kernels_it_registers(build_root):
    _, source_dir = built_unit(UNIT.name, "solution", build_root)
    (library,) = glob.glob(os.path.join(os.path.dirname(source_dir), "build", "*.so"))
    found = kernel_names.defined_kernels(kernel_names.submission_files(library, "", source_dir))
    assert "relu_bias_kernel" in found
    assert "relu_bias_cuda" not in found and "check_inputs" not in found  # host functions are not kernels


def test_triton_kernels_are_the_jit_functions(tmp_path):
    source = tmp_path / "kernels.py"
    source.write_text(
        "import triton\n@triton.jit\ndef add_kernel(x): pass\n"
        "@triton.autotune(configs=[], key=[])\n@triton.jit\ndef tuned_kernel(x): pass\n"
        "def helper(x): pass\n"
    )
    (tmp_path / "broken.py").write_text("def (:\n")
    (tmp_path / "linked.so").symlink_to("/etc/passwd")
    assert kernel_names.defined_kernels(kernel_names.submission_files("", "", str(tmp_path))) == {
        "add_kernel",
        "tuned_kernel",
    }


def _own_kernel_verdict(kernels, own=frozenset({"relu_bias_kernel"})):
    case = next(c for c in SPEC.CASES if c.name == "cuda_own_kernel")
    inputs = make_input_sets(SPEC, case, seed=1)[0]
    outputs = [tuple(t.to(inputs["x"].dtype) for t in SPEC.OPS["forward"].reference(inputs))]
    return judge(
        SPEC,
        case,
        [inputs],
        {"outputs": outputs, "ops": ["aten::empty"], "ops_seen": ["aten::empty"], "kernels": kernels},
        own_kernels=own,
    )


def test_an_own_kernel_is_one_the_submission_defines():
    assert _own_kernel_verdict([OWN, FILL, MEMCPY]).passed
    copied_back = _own_kernel_verdict([MEMCPY, "Memcpy DtoH (Device -> Pageable)"])  # computed on the CPU
    assert not copied_back.passed and "no kernel of your own" in copied_back.message
    named_elsewhere = _own_kernel_verdict(["void other_kernel<float>(float*)"])
    assert not named_elsewhere.passed and "other_kernel" in named_elsewhere.message


def test_pytorch_compute_kernels_fail_the_check_beside_an_own_one():
    verdict = _own_kernel_verdict([OWN, ATEN_ADD])
    assert not verdict.passed and "PyTorch's own kernels" in verdict.message
    assert "vectorized_elementwise_kernel" in verdict.message


def test_without_a_list_of_its_kernels_any_kernel_but_pytorchs_and_copies_counts():
    assert _own_kernel_verdict(["void other_kernel<float>(float*)"], own=None).passed
    assert not _own_kernel_verdict([MEMCPY], own=None).passed

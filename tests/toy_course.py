"""Toy units, one per build and load kind, written into a temporary course folder: each a
complete unit folder (unit.toml, lesson, sources with regions, public and hidden tests), to
show that a unit needs nothing outside its folder."""

import os

from course.spec.regions import solution_text

LESSON = """# {title}

<!-- runtime -->

<!-- setup -->

{sources}

<!-- build -->

<!-- tests -->

Why does doubling need no rounding?

<!-- answer q1 -->

<!-- submit -->
"""

# Its answer key: the question's points and rubric (course/spec/answer_key.py).
ANSWERS = """# {title} answer key

## q1

**Model answer.** Doubling adds one to the exponent.

Points: 1

Rubric:
- 1 point: the exponent goes up by one, the significand is unchanged.
"""

# The op of every toy: y = 2 * x, on the CPU. Each kind reaches it its own way.
PUBLIC_TESTS = '''"""{title}: y = scale(x) = 2 * x."""
import torch

from course.cases import Case
from course.ops import Op


def make_inputs(case, generator):
    return {{"x": torch.randn(case.params["n"], generator=generator).to(torch.{dtype})}}


def _call(ext, inputs):
    {call}


OPS = {{"scale": Op(call=_call, reference=lambda inputs: (2 * inputs["x"].double(),), outputs=("y",),
                   dtypes=lambda inputs: (torch.{dtype},), tolerance=lambda inputs: (0.0, 0.0))}}
CASES = [Case("cpu_scale_small", "cpu_values", params=dict(n=8), hint="y = 2 * x")]
'''

HIDDEN_TESTS = '''"""The cases only the autograder runs."""
from .public_tests import *  # noqa: F403
from .public_tests import CASES as PUBLIC_CASES

CASES = [*PUBLIC_CASES, Case("cpu_scale_long", "cpu_values", params=dict(n=1000))]  # noqa: F405
'''

MUTANTS = """[mutants.triples]
about = "multiplies by 3"
loses = ["cpu_scale_*"]
edits = [{{file = "{file}", old = "{old}", new = "{new}"}}]
"""

PYBIND_SCALE = """#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <stdexcept>
#include <vector>

std::vector<double> scale(std::vector<double> values) {
  // BEGIN SOLUTION
  for (double& value : values) value *= 2;
  return values;
  // STUB
  throw std::runtime_error("TODO(toy01): scale.cpp, scale: double every value");
  // END SOLUTION
}

PYBIND11_MODULE(TORCH_EXTENSION_NAME, m) { m.def("scale", &scale); }
"""

OPS_CPP = """#include <ATen/core/Tensor.h>
#include <ATen/ops/empty_like.h>
#include <torch/library.h>

void scale_kernel(const float* x, float* y, int64_t n);

at::Tensor scale(const at::Tensor& x) {
  TORCH_CHECK(x.scalar_type() == at::kFloat && x.is_contiguous(), "x: expected a contiguous float32 tensor");
  at::Tensor y = at::empty_like(x);
  scale_kernel(x.data_ptr<float>(), y.data_ptr<float>(), x.numel());
  return y;
}

TORCH_LIBRARY(NAMESPACE, m) { m.def("scale(Tensor x) -> Tensor"); }
TORCH_LIBRARY_IMPL(NAMESPACE, CPU, m) { m.impl("scale", &scale); }
"""

KERNEL_CPP = """#include <cstdint>
#include <stdexcept>

// No torch headers here: an edit of the kernel rebuilds in a second.
void scale_kernel(const float* x, float* y, int64_t n) {
  // BEGIN SOLUTION
  for (int64_t i = 0; i < n; ++i) y[i] = 2 * x[i];
  // STUB
  throw std::runtime_error("TODO(toy02): csrc/kernel.cpp, scale_kernel: y[i] = 2 * x[i]");
  // END SOLUTION
}
"""

SETUP_PY = """from setuptools import setup
from torch.utils.cpp_extension import BuildExtension, CppExtension

setup(name="toy02-ops", version="0.1.0", packages=["toy02_ops"],
      ext_modules=[CppExtension("toy02_ops._C", ["csrc/ops.cpp", "csrc/kernel.cpp"])],
      cmdclass={"build_ext": BuildExtension})
"""

PYPROJECT = """[build-system]
requires = ["setuptools>=64", "torch"]
build-backend = "setuptools.build_meta"
"""

PACKAGE_INIT = """import glob
import os

import torch

# The library registers torch.ops.toy02 as it loads.
torch.ops.load_library(glob.glob(os.path.join(os.path.dirname(__file__), "_C*.so"))[0])
"""

PYTHON_SCALE = """def scale(x):
    # BEGIN SOLUTION
    return 2 * x
    # STUB
    raise NotImplementedError("TODO(toy03): scale.py, scale: return 2 * x")
    # END SOLUTION
"""

TOYS = {
    "toy01_jit": dict(
        toml='build = "jit"\nload = "pybind"\n',
        files={"scale.cpp": PYBIND_SCALE},
        dtype="float64",
        call='return torch.tensor(ext.scale(inputs["x"].tolist()), dtype=torch.float64)',
        mutant=("scale.cpp", "value *= 2", "value *= 3"),
    ),
    "toy02_wheel": dict(
        toml='build = "wheel"\nload = "torch_ops"\nnamespace = "toy02"\npackage = "toy02_ops"\n',
        files={
            "pyproject.toml": PYPROJECT,
            "setup.py": SETUP_PY,
            "toy02_ops/__init__.py": PACKAGE_INIT,
            "csrc/ops.cpp": OPS_CPP.replace("NAMESPACE", "toy02"),
            "csrc/kernel.cpp": KERNEL_CPP,
        },
        dtype="float32",
        call='return ext.scale(inputs["x"])',
        mutant=("csrc/kernel.cpp", "2 * x[i]", "3 * x[i]"),
    ),
    "toy03_python": dict(
        toml='build = "none"\nload = "python"\n',
        files={"scale.py": PYTHON_SCALE},
        dtype="float32",
        call='return ext.scale(inputs["x"])',
        mutant=("scale.py", "return 2 * x", "return 3 * x"),
    ),
}


def write(path: str, text: str) -> None:
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "w", encoding="utf-8") as handle:
        handle.write(text)


def make_course(repo: str) -> str:
    """Write every toy unit into repo/solutions/ (and the shared header folder they would
    find there); return repo."""
    os.makedirs(os.path.join(repo, "solutions", "common"), exist_ok=True)
    for name, toy in TOYS.items():
        folder = os.path.join(repo, "solutions", name)
        title = f"Toy {name}"
        files = list(toy["files"])
        write(
            os.path.join(folder, "unit.toml"),
            f'title = "{title}"\nsources = {files!r}\n'.replace("'", '"') + toy["toml"],
        )
        write(
            os.path.join(folder, "lesson.md"),
            LESSON.format(title=title, sources="\n\n".join(f"<!-- source {f} -->" for f in files)),
        )
        write(os.path.join(folder, "answers.md"), ANSWERS.format(title=title))
        for file, text in toy["files"].items():
            write(os.path.join(folder, file), text)
        write(
            os.path.join(folder, "public_tests.py"),
            PUBLIC_TESTS.format(title=title, dtype=toy["dtype"], call=toy["call"]),
        )
        write(os.path.join(folder, "hidden_tests.py"), HIDDEN_TESTS)
        file, old, new = toy["mutant"]
        write(os.path.join(folder, "mutants.toml"), MUTANTS.format(file=file, old=old, new=new))
    return repo


def ops_source(namespace: str) -> dict[str, str]:
    """The wheel toy's two C++ files, solved, for a jit build under another namespace."""
    return {"ops.cpp": OPS_CPP.replace("NAMESPACE", namespace), "kernel.cpp": solution_text(KERNEL_CPP)}

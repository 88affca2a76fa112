// ReLU with a bias: the op as Python sees it.
//
// relu_bias(x [M, N], bias [N]) -> y [M, N],   y[row][col] = max(0, x[row][col] + bias[col])
//
// This file checks the inputs, allocates the output and sends the work to the CPU
// loop below or to the CUDA launcher in relu_bias.cu. x and bias may have any
// strides (a transposed x, a sliced bias): both paths index through accessors.
#include <torch/extension.h>

#include <ATen/OpMathType.h>
#include <c10/cuda/CUDAGuard.h>
#include <c10/cuda/CUDAStream.h>

#include <algorithm>

#include "course_todo.h"
#include "relu_bias.h"

namespace {

// BEGIN SOLUTION
// STUB
COURSE_TODO("day01: relu_bias.cpp, check_inputs: check device, dtype, dimensions and shapes, each with a message naming the argument, then delete this line");
// END SOLUTION
// Every message names the argument and says what was expected.
void check_inputs(const torch::Tensor& x, const torch::Tensor& bias) {
  // BEGIN SOLUTION
  TORCH_CHECK(x.is_cpu() || x.is_cuda(), "relu_bias: x must be on the CPU or a CUDA device, got ", x.device());
  TORCH_CHECK(x.dim() == 2, "relu_bias: x must be 2-D [M, N], got shape ", x.sizes());
  const auto dtype = x.scalar_type();
  TORCH_CHECK(dtype == torch::kFloat32 || dtype == torch::kFloat64 || dtype == torch::kFloat16 ||
                  dtype == torch::kBFloat16,
              "relu_bias: x must be float32, float64, float16 or bfloat16, got ", dtype);
  TORCH_CHECK(bias.device() == x.device(), "relu_bias: bias must be on the same device as x (", x.device(),
              "), got ", bias.device());
  TORCH_CHECK(bias.scalar_type() == dtype, "relu_bias: bias must have the dtype of x (", dtype, "), got ",
              bias.scalar_type());
  TORCH_CHECK(bias.dim() == 1 && bias.size(0) == x.size(1), "relu_bias: bias must have shape [N] = [",
              x.size(1), "], got ", bias.sizes());
  // STUB
  // TODO(day01): one TORCH_CHECK per requirement, e.g.
  //   TORCH_CHECK(x.dim() == 2, "relu_bias: x must be 2-D [M, N], got shape ", x.sizes());
  // END SOLUTION
}

// BEGIN SOLUTION
// STUB
COURSE_TODO_CPU("day01: relu_bias.cpp, relu_bias_cpu: write y_a[row][col] from x_a and bias_a, then delete this line");
// END SOLUTION
// The reference loop on the CPU: blocks of rows in parallel, one element at a time.
void relu_bias_cpu(const torch::Tensor& x, const torch::Tensor& bias, torch::Tensor& y) {
  AT_DISPATCH_FLOATING_TYPES_AND2(torch::kHalf, torch::kBFloat16, x.scalar_type(), "relu_bias_cpu", [&] {
    // accessor<scalar_t, 2> checks dtype and dimensions once, here, then indexes with strides.
    const auto x_a = x.accessor<scalar_t, 2>();
    const auto bias_a = bias.accessor<scalar_t, 1>();
    auto y_a = y.accessor<scalar_t, 2>();
    const int64_t cols = x.size(1);
    using opmath_t = at::opmath_type<scalar_t>;  // float for Half and BFloat16, as in the kernel
    // Hand out about GRAIN_SIZE elements a task: smaller tasks cost more to start than to run.
    const int64_t rows_per_task = std::max<int64_t>(1, at::internal::GRAIN_SIZE / std::max<int64_t>(cols, 1));
    at::parallel_for(0, x.size(0), rows_per_task, [&](int64_t begin, int64_t end) {
      for (int64_t row = begin; row < end; ++row) {
        for (int64_t col = 0; col < cols; ++col) {
          // BEGIN SOLUTION
          const opmath_t sum = static_cast<opmath_t>(x_a[row][col]) + static_cast<opmath_t>(bias_a[col]);
          y_a[row][col] = static_cast<scalar_t>(sum < 0 ? 0 : sum);  // NaN passes through, as in torch.relu
          // STUB
          // TODO(day01): y_a[row][col] = max(0, x_a[row][col] + bias_a[col]), added in opmath_t
          // END SOLUTION
        }
      }
    });
  });
}

// BEGIN SOLUTION
// STUB
COURSE_TODO_CUDA("day01: relu_bias.cpp, relu_bias_cuda: call launch_relu_bias with accessors of x, bias and y on the current stream for each dtype and check its error, then delete this line");
// END SOLUTION
void relu_bias_cuda(const torch::Tensor& x, const torch::Tensor& bias, torch::Tensor& y) {
  const c10::cuda::CUDAGuard device_guard(x.device());  // launch on x's GPU, not GPU 0
  // BEGIN SOLUTION
  const cudaStream_t stream = c10::cuda::getCurrentCUDAStream();  // never the legacy default stream
  AT_DISPATCH_FLOATING_TYPES_AND2(torch::kHalf, torch::kBFloat16, x.scalar_type(), "relu_bias_cuda", [&] {
    // packed_accessor32 refuses (throws) tensors too large for 32-bit index math.
    const cudaError_t error = launch_relu_bias<scalar_t>(
        x.packed_accessor32<scalar_t, 2>(), bias.packed_accessor32<scalar_t, 1>(), y.packed_accessor32<scalar_t, 2>(), stream);
    TORCH_CHECK(error == cudaSuccess, "relu_bias: kernel launch failed: ", cudaGetErrorString(error));
  });
  // STUB
  // TODO(day01): AT_DISPATCH_FLOATING_TYPES_AND2(torch::kHalf, torch::kBFloat16, x.scalar_type(), ...)
  // calling launch_relu_bias<scalar_t> with x.packed_accessor32<scalar_t, 2>(), the same for bias
  // (1-D) and y, and c10::cuda::getCurrentCUDAStream(); then TORCH_CHECK that the cudaError_t it
  // returns is cudaSuccess.
  // END SOLUTION
}

torch::Tensor relu_bias(const torch::Tensor& x, const torch::Tensor& bias) {
  const std::string todo = course::todos_blocking(x);
  TORCH_CHECK(todo.empty(), "this op is not finished yet:\n", todo);
  check_inputs(x, bias);
  // A fresh row-major y whatever the layout of x (empty_like would copy a transposed
  // x's strides): callers get the layout they expect.
  auto y = torch::empty({x.size(0), x.size(1)}, x.options());
  if (x.is_cuda()) {
    relu_bias_cuda(x, bias, y);
  } else {
    relu_bias_cpu(x, bias, y);
  }
  return y;
}

}  // namespace

PYBIND11_MODULE(TORCH_EXTENSION_NAME, m) {
  m.doc() = "ReLU with a bias (day01)";
  m.def("relu_bias", &relu_bias, "y = max(0, x + bias) for x [M, N] and bias [N]", pybind11::arg("x"),
        pybind11::arg("bias"));
}

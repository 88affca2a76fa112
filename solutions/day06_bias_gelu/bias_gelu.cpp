// Fused bias + GELU: the ops as Python sees them.
//
// forward(x [..., N], bias [N], approximate = "none") -> y = gelu(x + bias)
// backward(dy [..., N], x [..., N], bias [N], approximate = "none") -> (dx, dbias)
//     dx = dy · gelu'(x + bias),  dbias = dx summed over every row
//
// approximate is "none" (the erf form) or "tanh", as in torch.nn.functional.gelu. This file
// checks the arguments, makes x, dy and bias contiguous (a copy only where they are not),
// allocates the outputs, and sends the work to the CPU loops below or to the launchers in
// bias_gelu_forward.cu and bias_gelu_backward.cu. An empty x launches nothing.
// ATen and the pybind11 glue, as in day02: torch/extension.h would double the compile time.
#include <ATen/ATen.h>
#include <ATen/OpMathType.h>
#include <ATen/Parallel.h>
#include <torch/csrc/utils/pybind.h>
#include <c10/cuda/CUDAGuard.h>
#include <c10/cuda/CUDAStream.h>

#include <string>
#include <vector>

#include "bias_gelu.h"
#include "course_todo.h"
#include "cuda_ptr.h"
#include "gelu_math.h"

namespace {

constexpr int64_t kMaxCols = (int64_t{1} << 31) - 1;  // the kernels index columns with int

// ---- checks: every message names the op and the argument and says what was expected ----

// Numbers in messages are formatted here, not streamed: streaming an integer from an extension
// crashed the process on the course's H200 image (see day03's layernorm.cpp).
std::string shape_text(at::IntArrayRef sizes) {
  std::string text = "[";
  for (size_t i = 0; i < sizes.size(); ++i) text += (i ? ", " : "") + std::to_string(sizes[i]);
  return text + "]";
}

GeluForm parse_approximate(const char* op, const std::string& approximate) {
  TORCH_CHECK(approximate == "none" || approximate == "tanh", op,
              ": approximate must be \"none\" (the erf form) or \"tanh\", got \"", approximate, "\"");
  return approximate == "tanh" ? GeluForm::kTanh : GeluForm::kErf;
}

// x: [..., N] of a floating dtype GELU is computed for, on the CPU or a GPU.
void check_x(const char* op, const at::Tensor& x) {
  TORCH_CHECK(x.is_cpu() || x.is_cuda(), op, ": x must be on the CPU or a CUDA device, got ", x.device().str());
  TORCH_CHECK(x.dim() >= 1, op, ": x must have shape [..., N] (at least 1 dimension), got a 0-dimensional tensor");
  const auto dtype = x.scalar_type();
  TORCH_CHECK(dtype == at::kFloat || dtype == at::kHalf || dtype == at::kBFloat16 || dtype == at::kDouble, op,
              ": x must be float32, float16, bfloat16 or float64, got ", c10::toString(dtype));
  TORCH_CHECK(x.size(-1) <= kMaxCols, op, ": x's last dimension N must be below 2^31, got ",
              std::to_string(x.size(-1)));
}

// `tensor` (bias, dy) must be on x's device, of x's dtype, and of shape `sizes` (`shape_name`).
void check_like_x(const char* op, const char* name, const at::Tensor& tensor, const at::Tensor& x,
                  at::IntArrayRef sizes, const std::string& shape_name) {
  TORCH_CHECK(tensor.device() == x.device(), op, ": ", name, " must be on x's device (", x.device().str(),
              "), got ", tensor.device().str());
  TORCH_CHECK(tensor.scalar_type() == x.scalar_type(), op, ": ", name, " must have x's dtype (",
              c10::toString(x.scalar_type()), "), got ", c10::toString(tensor.scalar_type()));
  TORCH_CHECK(tensor.sizes() == sizes, op, ": ", name, " must have shape ", shape_text(sizes), " (", shape_name,
              "), got ", shape_text(tensor.sizes()));
}

int64_t num_rows(const at::Tensor& x) {
  const int64_t cols = x.size(-1);
  return cols == 0 ? 0 : x.numel() / cols;
}

// ---- the CPU loops: the kernels' math (gelu_math.h) in plain C++ ----

template <typename scalar_t, GeluForm kForm>
void forward_cpu(const at::Tensor& x, const at::Tensor& bias, at::Tensor& y, int64_t rows, int64_t cols) {
  using acc_t = at::opmath_type<scalar_t>;  // float for Half and BFloat16, as on the GPU
  const scalar_t* x_p = x.const_data_ptr<scalar_t>();
  const scalar_t* bias_p = bias.const_data_ptr<scalar_t>();
  scalar_t* y_p = y.data_ptr<scalar_t>();
  const int64_t rows_per_task = std::max<int64_t>(1, at::internal::GRAIN_SIZE / cols);
  at::parallel_for(0, rows, rows_per_task, [&](int64_t begin, int64_t end) {
    for (int64_t row = begin; row < end; ++row) {
      for (int64_t col = 0; col < cols; ++col) {
        const acc_t u = static_cast<acc_t>(x_p[row * cols + col]) + static_cast<acc_t>(bias_p[col]);
        y_p[row * cols + col] = static_cast<scalar_t>(gelu<kForm>(u));
      }
    }
  });
}

// The rows of a CPU strip. dbias is summed in the GPU's two stages: each strip of rows into its
// own row of partial sums (the strips in parallel), then the strips in order. The order of every
// sum is fixed, whatever the number of threads, and no running sum grows over more than a
// strip's rows before it meets the others.
constexpr int64_t kCpuStripRows = 64;

template <typename scalar_t, GeluForm kForm>
void backward_cpu(const at::Tensor& dy, const at::Tensor& x, const at::Tensor& bias, at::Tensor& dx,
                  at::Tensor& dbias, int64_t rows, int64_t cols) {
  using acc_t = at::opmath_type<scalar_t>;
  const scalar_t* dy_p = dy.const_data_ptr<scalar_t>();
  const scalar_t* x_p = x.const_data_ptr<scalar_t>();
  const scalar_t* bias_p = bias.const_data_ptr<scalar_t>();
  scalar_t* dx_p = dx.data_ptr<scalar_t>();
  const int64_t strips = (rows + kCpuStripRows - 1) / kCpuStripRows;
  std::vector<acc_t> partials(strips * cols, acc_t(0));
  at::parallel_for(0, strips, 1, [&](int64_t begin, int64_t end) {
    for (int64_t strip = begin; strip < end; ++strip) {
      acc_t* sums = partials.data() + strip * cols;
      const int64_t last_row = std::min(rows, (strip + 1) * kCpuStripRows);
      for (int64_t row = strip * kCpuStripRows; row < last_row; ++row) {
        for (int64_t col = 0; col < cols; ++col) {
          const int64_t i = row * cols + col;
          const acc_t u = static_cast<acc_t>(x_p[i]) + static_cast<acc_t>(bias_p[col]);
          const acc_t d = static_cast<acc_t>(dy_p[i]) * gelu_grad<kForm>(u);
          dx_p[i] = static_cast<scalar_t>(d);
          sums[col] += d;
        }
      }
    }
  });
  std::vector<acc_t> totals(cols, acc_t(0));
  for (int64_t strip = 0; strip < strips; ++strip) {
    for (int64_t col = 0; col < cols; ++col) totals[col] += partials[strip * cols + col];
  }
  scalar_t* dbias_p = dbias.data_ptr<scalar_t>();
  for (int64_t col = 0; col < cols; ++col) dbias_p[col] = static_cast<scalar_t>(totals[col]);
}

// ---- the ops ----

at::Tensor forward(const at::Tensor& x_any, const at::Tensor& bias_any, const std::string& approximate) {
  COURSE_REFUSE_UNFINISHED(x_any, "bias_gelu_forward_kernel");
  const GeluForm form = parse_approximate("bias_gelu forward", approximate);
  check_x("bias_gelu forward", x_any);
  check_like_x("bias_gelu forward", "bias", bias_any, x_any, {x_any.size(-1)}, "1-D [N], N = x.size(-1)");
  const at::Tensor x = x_any.contiguous();
  const at::Tensor bias = bias_any.contiguous();
  const int64_t cols = x.size(-1);
  const int64_t rows = num_rows(x);
  auto y = at::empty(x.sizes(), x.options());
  if (x.numel() == 0) return y;
  if (x.is_cuda()) {
    const c10::cuda::CUDAGuard device_guard(x.device());  // launch on x's GPU, not GPU 0
    const cudaStream_t stream = c10::cuda::getCurrentCUDAStream();
    AT_DISPATCH_FLOATING_TYPES_AND2(at::kHalf, at::kBFloat16, x.scalar_type(), "bias_gelu_forward", [&] {
      const cudaError_t error = launch_bias_gelu_forward(cuda_ptr<scalar_t>(x), cuda_ptr<scalar_t>(bias),
                                                         cuda_ptr<scalar_t>(y), rows, cols, form, stream);
      TORCH_CHECK(error == cudaSuccess, "bias_gelu forward: kernel launch failed: ", cudaGetErrorString(error));
    });
  } else {
    AT_DISPATCH_FLOATING_TYPES_AND2(at::kHalf, at::kBFloat16, x.scalar_type(), "bias_gelu_forward_cpu", [&] {
      if (form == GeluForm::kTanh) {
        forward_cpu<scalar_t, GeluForm::kTanh>(x, bias, y, rows, cols);
      } else {
        forward_cpu<scalar_t, GeluForm::kErf>(x, bias, y, rows, cols);
      }
    });
  }
  return y;
}

std::tuple<at::Tensor, at::Tensor> backward(const at::Tensor& dy_any, const at::Tensor& x_any,
                                            const at::Tensor& bias_any, const std::string& approximate) {
  COURSE_REFUSE_UNFINISHED(x_any, "bias_gelu_backward_kernel", "sum_strips_kernel", "gelu_erf_grad", "gelu_tanh_grad");
  const GeluForm form = parse_approximate("bias_gelu backward", approximate);
  check_x("bias_gelu backward", x_any);
  check_like_x("bias_gelu backward", "bias", bias_any, x_any, {x_any.size(-1)}, "1-D [N], N = x.size(-1)");
  check_like_x("bias_gelu backward", "dy", dy_any, x_any, x_any.sizes(), "x's shape");
  const at::Tensor dy = dy_any.contiguous();
  const at::Tensor x = x_any.contiguous();
  const at::Tensor bias = bias_any.contiguous();
  const int64_t cols = x.size(-1);
  const int64_t rows = num_rows(x);
  auto dx = at::empty(x.sizes(), x.options());
  // A sum over no rows is 0: the one output an empty x still has values for.
  auto dbias = rows == 0 ? at::zeros({cols}, x.options()) : at::empty({cols}, x.options());
  if (x.numel() == 0) return {dx, dbias};
  if (x.is_cuda()) {
    const c10::cuda::CUDAGuard device_guard(x.device());
    const cudaStream_t stream = c10::cuda::getCurrentCUDAStream();
    AT_DISPATCH_FLOATING_TYPES_AND2(at::kHalf, at::kBFloat16, x.scalar_type(), "bias_gelu_backward", [&] {
      using T = typename CudaType<scalar_t>::type;
      const T* dy_ptr = cuda_ptr<scalar_t>(dy);
      const T* x_ptr = cuda_ptr<scalar_t>(x);
      const T* bias_ptr = cuda_ptr<scalar_t>(bias);
      T* dx_ptr = cuda_ptr<scalar_t>(dx);
      const int64_t strips = bias_gelu_backward_strips(dy_ptr, x_ptr, bias_ptr, dx_ptr, rows, cols, form);
      // Freed on return with the kernels perhaps still running: safe, the caching allocator hands
      // it out again only to work queued after them on this stream.
      auto partials = at::empty({strips, cols}, x.options().dtype(at::toOpMathType(x.scalar_type())));
      const cudaError_t error = launch_bias_gelu_backward(dy_ptr, x_ptr, bias_ptr, dx_ptr,
                                                          partials.data_ptr<at::opmath_type<scalar_t>>(),
                                                          cuda_ptr<scalar_t>(dbias), rows, cols, form, stream);
      TORCH_CHECK(error == cudaSuccess, "bias_gelu backward: kernel launch failed: ", cudaGetErrorString(error));
    });
  } else {
    AT_DISPATCH_FLOATING_TYPES_AND2(at::kHalf, at::kBFloat16, x.scalar_type(), "bias_gelu_backward_cpu", [&] {
      if (form == GeluForm::kTanh) {
        backward_cpu<scalar_t, GeluForm::kTanh>(dy, x, bias, dx, dbias, rows, cols);
      } else {
        backward_cpu<scalar_t, GeluForm::kErf>(dy, x, bias, dx, dbias, rows, cols);
      }
    });
  }
  return {dx, dbias};
}

}  // namespace

PYBIND11_MODULE(TORCH_EXTENSION_NAME, m) {
  m.doc() = "Fused bias + GELU, forward and backward (day06)";
  m.def("forward", &forward, "y = gelu(x + bias) for x [..., N] and bias [N]; approximate is 'none' or 'tanh'",
        pybind11::arg("x"), pybind11::arg("bias"), pybind11::arg("approximate") = "none");
  m.def("backward", &backward, "(dx, dbias) = backward(dy, x, bias, approximate='none'): dx = dy * gelu'(x + bias), "
        "dbias = dx summed over every row", pybind11::arg("dy"), pybind11::arg("x"), pybind11::arg("bias"),
        pybind11::arg("approximate") = "none");
}

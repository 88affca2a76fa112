// LayerNorm forward and backward: the ops as Python sees them.
//
// forward(x [B, D], gamma [D], beta [D], eps) -> (y [B, D], mean [B], rstd [B])
// backward(dy [B, D], x [B, D], gamma [D], mean [B], rstd [B], output_mask = (true, true, true))
//     -> (dx [B, D], dgamma [D], dbeta [D]), with None for each output the mask leaves out
//
// forward is day02's op, kernel and all. backward checks its inputs, allocates the outputs
// and sends the work to the CPU code below or to the launchers in layernorm_backward.cu.
// ATen and the pybind11 glue, as in day02: torch/extension.h would double the compile time.
#include <ATen/ATen.h>
#include <ATen/AccumulateType.h>
#include <ATen/Parallel.h>
#include <torch/csrc/utils/pybind.h>

#include <c10/cuda/CUDAGuard.h>
#include <c10/cuda/CUDAStream.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <cstdio>
#include <string>

#include "course_todo.h"
#include "layernorm_backward.h"
#include "layernorm_forward.h"

namespace {

// Checks shared by both ops. Every message names the op and the argument and says what
// was expected.

// Numbers in the messages are formatted here, not streamed (<< x.sizes(), << eps): streaming
// an integer from an extension crashed the process on the course's H200 image (torch 2.11,
// GCC 13), while streaming strings works.
std::string shape_text(at::IntArrayRef sizes) {
  std::string text = "[";
  for (size_t i = 0; i < sizes.size(); ++i) text += (i ? ", " : "") + std::to_string(sizes[i]);
  return text + "]";
}

std::string number_text(double value) {
  char text[32];
  std::snprintf(text, sizeof text, "%g", value);
  return text;
}

// x: 2-D [B, D] with D >= 1, float32 or float64, contiguous, on the CPU or a GPU.
void check_x(const char* op, const at::Tensor& x) {
  TORCH_CHECK(x.dim() == 2, op, ": x must be 2-D [B, D], got shape ", shape_text(x.sizes()));
  TORCH_CHECK(x.size(1) > 0, op, ": x must have D >= 1 features, got shape ", shape_text(x.sizes()));
  TORCH_CHECK(x.scalar_type() == at::kFloat || x.scalar_type() == at::kDouble, op,
              ": x must be float32 or float64, got ", x.scalar_type());
  TORCH_CHECK(x.is_cpu() || x.is_cuda(), op, ": x must be on the CPU or a CUDA device, got ", x.device());
  TORCH_CHECK(x.is_contiguous(), op, ": x must be contiguous (call .contiguous() first)");
}

enum class Layout { kContiguous, kAnyStrides };

// `tensor` must be on x's device, have x's dtype and the shape `sizes`.
void check_like_x(const char* op, const char* name, const at::Tensor& tensor, const at::Tensor& x,
                  at::IntArrayRef sizes, Layout layout = Layout::kContiguous) {
  TORCH_CHECK(tensor.device() == x.device(), op, ": ", name, " must be on the same device as x (",
              x.device(), "), got ", tensor.device());
  TORCH_CHECK(tensor.scalar_type() == x.scalar_type(), op, ": ", name, " must have the dtype of x (",
              x.scalar_type(), "), got ", tensor.scalar_type());
  TORCH_CHECK(tensor.sizes() == sizes, op, ": ", name, " must have shape ", shape_text(sizes), ", got ",
              shape_text(tensor.sizes()));
  TORCH_CHECK(layout == Layout::kAnyStrides || tensor.is_contiguous(), op, ": ", name, " must be contiguous");
}

// ---- forward: day02's op, with its kernel from layernorm_forward.cu ----

void forward_cpu(const at::Tensor& x, const at::Tensor& gamma, const at::Tensor& beta,
                 double eps, at::Tensor& y, at::Tensor& mean, at::Tensor& rstd) {
  AT_DISPATCH_FLOATING_TYPES(x.scalar_type(), "layernorm_forward_cpu", [&] {
    const auto x_a = x.accessor<scalar_t, 2>();
    const auto gamma_a = gamma.accessor<scalar_t, 1>();
    const auto beta_a = beta.accessor<scalar_t, 1>();
    auto y_a = y.accessor<scalar_t, 2>();
    auto mean_a = mean.accessor<scalar_t, 1>();
    auto rstd_a = rstd.accessor<scalar_t, 1>();
    const int64_t cols = x.size(1);
    at::parallel_for(0, x.size(0), 1, [&](int64_t begin, int64_t end) {
      for (int64_t row = begin; row < end; ++row) {
        scalar_t sum = 0;
        for (int64_t j = 0; j < cols; ++j) sum += x_a[row][j];
        const scalar_t mu = sum / cols;
        scalar_t squares = 0;
        for (int64_t j = 0; j < cols; ++j) squares += (x_a[row][j] - mu) * (x_a[row][j] - mu);
        const scalar_t r = scalar_t(1) / std::sqrt(squares / cols + static_cast<scalar_t>(eps));
        for (int64_t j = 0; j < cols; ++j) y_a[row][j] = (x_a[row][j] - mu) * r * gamma_a[j] + beta_a[j];
        mean_a[row] = mu;
        rstd_a[row] = r;
      }
    });
  });
}

std::tuple<at::Tensor, at::Tensor, at::Tensor> forward(const at::Tensor& x,
                                                               const at::Tensor& gamma,
                                                               const at::Tensor& beta, double eps) {
  constexpr const char* op = "layernorm forward";
  check_x(op, x);
  check_like_x(op, "gamma", gamma, x, {x.size(1)});
  check_like_x(op, "beta", beta, x, {x.size(1)});
  TORCH_CHECK(std::isfinite(eps) && eps > 0, op, ": eps must be a finite number > 0, got ", number_text(eps));
  auto y = at::empty_like(x);
  auto mean = at::empty({x.size(0)}, x.options());
  auto rstd = at::empty({x.size(0)}, x.options());
  if (x.is_cuda()) {
    const c10::cuda::CUDAGuard device_guard(x.device());
    AT_DISPATCH_FLOATING_TYPES(x.scalar_type(), "layernorm_forward_cuda", [&] {
      const cudaError_t error = launch_layernorm_forward<scalar_t>(
          x.data_ptr<scalar_t>(), gamma.data_ptr<scalar_t>(), beta.data_ptr<scalar_t>(),
          y.data_ptr<scalar_t>(), mean.data_ptr<scalar_t>(), rstd.data_ptr<scalar_t>(), x.size(0),
          x.size(1), eps, c10::cuda::getCurrentCUDAStream());
      TORCH_CHECK(error == cudaSuccess, op, ": kernel launch failed: ", cudaGetErrorString(error));
    });
  } else {
    forward_cpu(x, gamma, beta, eps, y, mean, rstd);
  }
  return {y, mean, rstd};
}

// ---- backward ----

COURSE_TODO("day03: layernorm.cpp, check_backward_inputs: check dy, x, gamma, mean and rstd with check_x and check_like_x, then delete this line");
void check_backward_inputs(const at::Tensor& dy, const at::Tensor& x, const at::Tensor& gamma,
                           const at::Tensor& mean, const at::Tensor& rstd) {
  // TODO(day03): check_x for x, then check_like_x for the others, e.g.
  //   check_like_x("layernorm backward", "mean", mean, x, {x.size(0)});
  // dy may have any strides (pass Layout::kAnyStrides): backward makes it contiguous.
}

// The CPU version of the kernels in layernorm_backward.cu, with the same math and the same
// strips for dgamma and dbeta. Sums run in at::acc_type: double, also for float.
void backward_cpu(const at::Tensor& dy, const at::Tensor& x, const at::Tensor& gamma,
                  const at::Tensor& mean, const at::Tensor& rstd, at::Tensor& dx,
                  at::Tensor& dgamma, at::Tensor& dbeta) {
  AT_DISPATCH_FLOATING_TYPES(x.scalar_type(), "layernorm_backward_cpu", [&] {
    using acc_t = at::acc_type<scalar_t, /*is_cuda=*/false>;
    const int64_t rows = x.size(0);
    const int64_t cols = x.size(1);
    const scalar_t* dy_p = dy.data_ptr<scalar_t>();
    const scalar_t* x_p = x.data_ptr<scalar_t>();
    const scalar_t* gamma_p = gamma.data_ptr<scalar_t>();
    const scalar_t* mean_p = mean.data_ptr<scalar_t>();
    const scalar_t* rstd_p = rstd.data_ptr<scalar_t>();

    if (dx.defined()) {
      scalar_t* dx_p = dx.data_ptr<scalar_t>();
      at::parallel_for(0, rows, 1, [&](int64_t begin, int64_t end) {
        for (int64_t row = begin; row < end; ++row) {
          const acc_t row_mean = mean_p[row];
          const acc_t row_rstd = rstd_p[row];
          acc_t sum_g = 0;
          acc_t sum_g_xhat = 0;
          for (int64_t j = 0; j < cols; ++j) {
            const acc_t g = acc_t(dy_p[row * cols + j]) * gamma_p[j];
            sum_g += g;
            sum_g_xhat += g * (x_p[row * cols + j] - row_mean) * row_rstd;
          }
          const acc_t mean_g = sum_g / cols;
          const acc_t mean_g_xhat = sum_g_xhat / cols;
          for (int64_t j = 0; j < cols; ++j) {
            const acc_t g = acc_t(dy_p[row * cols + j]) * gamma_p[j];
            const acc_t xhat = (x_p[row * cols + j] - row_mean) * row_rstd;
            dx_p[row * cols + j] = static_cast<scalar_t>(row_rstd * (g - mean_g - xhat * mean_g_xhat));
          }
        }
      });
    }

    if (dgamma.defined()) {
      // Stage 1: strips in parallel; each adds its rows into its own row of partials, which
      // therefore starts at zero. Fixed strips (not one per thread) keep the order of the
      // additions, and so the result, the same on any number of threads.
      const int64_t strips = num_param_strips(rows);
      const int64_t strip_rows = rows_per_param_strip(rows);
      auto partials = at::zeros({2, strips, cols}, x.options().dtype(c10::CppTypeToScalarType<acc_t>::value));
      acc_t* partial_dgamma = partials.data_ptr<acc_t>();
      acc_t* partial_dbeta = partial_dgamma + strips * cols;
      at::parallel_for(0, strips, 1, [&](int64_t begin, int64_t end) {
        for (int64_t strip = begin; strip < end; ++strip) {
          acc_t* strip_dgamma = partial_dgamma + strip * cols;
          acc_t* strip_dbeta = partial_dbeta + strip * cols;
          const int64_t end_row = std::min(rows, (strip + 1) * strip_rows);
          for (int64_t row = strip * strip_rows; row < end_row; ++row) {
            const acc_t row_mean = mean_p[row];
            const acc_t row_rstd = rstd_p[row];
            for (int64_t j = 0; j < cols; ++j) {
              const acc_t dy_value = dy_p[row * cols + j];
              strip_dgamma[j] += dy_value * (x_p[row * cols + j] - row_mean) * row_rstd;
              strip_dbeta[j] += dy_value;
            }
          }
        }
      });
      // Stage 2: per column, the strips' partials in order.
      scalar_t* dgamma_p = dgamma.data_ptr<scalar_t>();
      scalar_t* dbeta_p = dbeta.data_ptr<scalar_t>();
      for (int64_t col = 0; col < cols; ++col) {
        acc_t dgamma_sum = 0;
        acc_t dbeta_sum = 0;
        for (int64_t strip = 0; strip < strips; ++strip) {
          dgamma_sum += partial_dgamma[strip * cols + col];
          dbeta_sum += partial_dbeta[strip * cols + col];
        }
        dgamma_p[col] = static_cast<scalar_t>(dgamma_sum);
        dbeta_p[col] = static_cast<scalar_t>(dbeta_sum);
      }
    }
  });
}

COURSE_TODO_CUDA("day03: layernorm.cpp, backward_cuda: allocate the partials, call both launchers on the current stream and check their errors, then delete this line");
// dx, dgamma and dbeta are allocated; an undefined one (not asked for) is not computed.
// dgamma and dbeta are defined together.
void backward_cuda(const at::Tensor& dy, const at::Tensor& x, const at::Tensor& gamma,
                   const at::Tensor& mean, const at::Tensor& rstd, at::Tensor& dx,
                   at::Tensor& dgamma, at::Tensor& dbeta) {
  const c10::cuda::CUDAGuard device_guard(x.device());  // launch on x's GPU, not GPU 0
  // TODO(day03): like day02's forward_cuda: dispatch on dtype and, on
  // c10::cuda::getCurrentCUDAStream(),
  //   - if dx is defined, call launch_layernorm_backward_dx;
  //   - if dgamma is defined, allocate the partials, at::empty({2, num_param_strips(rows), cols},
  //     x.options()), and call launch_layernorm_backward_params.
  // TORCH_CHECK each returned error.
}

COURSE_TODO("day03: layernorm.cpp, backward: accept a dy of any strides, then delete this line");
std::tuple<at::Tensor, at::Tensor, at::Tensor> backward(const at::Tensor& dy_any_strides,
                                                                const at::Tensor& x,
                                                                const at::Tensor& gamma,
                                                                const at::Tensor& mean,
                                                                const at::Tensor& rstd,
                                                                std::array<bool, 3> output_mask) {
  // Refused while a function this call runs is unwritten: the checks, then x's path, each
  // kernel only where its outputs are asked for.
  COURSE_REFUSE_UNFINISHED(x, "check_backward_inputs");
  check_backward_inputs(dy_any_strides, x, gamma, mean, rstd);
  const auto [want_dx, want_dgamma, want_dbeta] = output_mask;
  const bool want_params = want_dgamma || want_dbeta;  // both come out of the same two kernels
  COURSE_REFUSE_UNFINISHED(x, "backward", "backward_cuda");
  if (want_dx) {
    COURSE_REFUSE_UNFINISHED(x, "layernorm_backward_dx_kernel");
  }
  if (want_params) {
    COURSE_REFUSE_UNFINISHED(x, "param_partials_kernel", "param_sums_kernel");
  }
  // TODO(day03): the kernels and the CPU code read dy as row-major [B, D], but autograd may
  // hand over a transposed or sliced dy. Make a row-major one (a no-op when it already is).
  const at::Tensor& dy = dy_any_strides;
  at::Tensor dx = want_dx ? at::empty_like(x) : at::Tensor();
  at::Tensor dgamma = want_params ? at::empty_like(gamma) : at::Tensor();
  at::Tensor dbeta = want_params ? at::empty_like(gamma) : at::Tensor();
  if (x.is_cuda()) {
    backward_cuda(dy, x, gamma, mean, rstd, dx, dgamma, dbeta);
  } else {
    backward_cpu(dy, x, gamma, mean, rstd, dx, dgamma, dbeta);
  }
  // An undefined tensor reaches Python as None.
  return {dx, want_dgamma ? dgamma : at::Tensor(), want_dbeta ? dbeta : at::Tensor()};
}

}  // namespace

PYBIND11_MODULE(TORCH_EXTENSION_NAME, m) {
  m.doc() = "LayerNorm forward (day02's kernel) and backward (day03)";
  m.def("forward", &forward, "LayerNorm forward: (y, mean, rstd) = forward(x, gamma, beta, eps)",
        pybind11::arg("x"), pybind11::arg("gamma"), pybind11::arg("beta"), pybind11::arg("eps"));
  m.def("backward", &backward,
        "LayerNorm backward: (dx, dgamma, dbeta) = backward(dy, x, gamma, mean, rstd, output_mask); "
        "output_mask says which of the three to compute (the others are None)",
        pybind11::arg("dy"), pybind11::arg("x"), pybind11::arg("gamma"), pybind11::arg("mean"),
        pybind11::arg("rstd"), pybind11::arg("output_mask") = std::array<bool, 3>{true, true, true});
}

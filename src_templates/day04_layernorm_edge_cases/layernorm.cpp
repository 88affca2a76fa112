// LayerNorm over the last dimension, forward and backward, for every input F.layer_norm takes
// there: the ops as Python sees them.
//
// forward(x [..., D], normalized_shape = [D], gamma [D], beta [D], eps)
//     -> (y [..., D], mean [...], rstd [...])
// backward(dy [..., D], x [..., D], gamma [D], mean [...], rstd [...], output_mask = (true, true, true))
//     -> (dx [..., D], dgamma [D], dbeta [D]), with None for each output the mask leaves out
//
// x, dy, gamma and beta share one dtype: float16, bfloat16, float32 or float64. mean and rstd
// are float32 for the first three (the kernels' accumulation type), float64 for float64. Any
// shape [..., D] and any strides are accepted. Every argument is checked, with a message naming
// it, before anything is allocated or launched. CPU tensors take the CPU path below: the
// kernels' algorithms one row at a time, so that a machine without a GPU tests everything else.
#include <ATen/ATen.h>
#include <ATen/OpMathType.h>
#include <ATen/Parallel.h>
#include <torch/csrc/utils/pybind.h>

#include <c10/cuda/CUDAGuard.h>
#include <c10/cuda/CUDAStream.h>

#include <algorithm>
#include <array>
#include <climits>
#include <cmath>
#include <vector>

#include "course_todo.h"
#include "cuda_ptr.h"
#include "layernorm_kernels.h"

namespace {

// ---- layout: what the kernels read ----

COURSE_TODO("day04: layernorm.cpp, row_major, num_rows and batch_shape: accept x of any shape [..., D] and any strides, then delete this line");
// The kernels and the CPU loops walk a tensor's memory as rows of D neighbouring elements. A
// strided view (a transpose, a slice, an expand) keeps its elements elsewhere: walked that way
// it yields the wrong values, or the gaps between them. So such a view is copied into row-major
// order first; contiguous() returns the tensor itself when it already is, for free.
at::Tensor row_major(const at::Tensor& t) {
  return t;  // TODO(day04): a row-major tensor with t's values, copied only where needed
}

// Every dimension of x [..., D] but the last counts rows of D: [2, 3, 5, D] is 30 rows.
int64_t num_rows(const at::Tensor& x) {
  return x.size(0);  // TODO(day04): the number of rows of D in x [..., D], whatever its number of dimensions
}

// The shape of mean and rstd: one statistic per row, so x's shape without its last dimension.
std::vector<int64_t> batch_shape(const at::Tensor& x) {
  return {x.size(0)};  // TODO(day04): x's shape without its last dimension
}

// mean and rstd are kept in the kernels' accumulation type: float32 for float16, bfloat16 and
// float32, float64 for float64.
at::ScalarType stats_dtype(at::ScalarType dtype) { return at::toOpMathType(dtype); }

bool is_float_type(at::ScalarType dtype) {
  return dtype == at::kHalf || dtype == at::kBFloat16 || dtype == at::kFloat || dtype == at::kDouble;
}

// ---- checks: every message names the op and the argument and says what was expected ----

// `tensor` must be on x's device and have the dtype and the shape given; any strides.
void check_like_x(const char* op, const char* name, const at::Tensor& tensor, const at::Tensor& x,
                  at::ScalarType dtype, at::IntArrayRef sizes) {
  TORCH_CHECK(tensor.device() == x.device(), op, ": ", name, " must be on the same device as x (",
              x.device(), "), got ", tensor.device());
  TORCH_CHECK(tensor.scalar_type() == dtype, op, ": ", name, " must have dtype ", dtype,
              " to match x (", x.scalar_type(), "), got ", tensor.scalar_type());
  TORCH_CHECK(tensor.sizes() == sizes, op, ": ", name, " must have shape ", sizes, ", got ",
              tensor.sizes());
}

COURSE_TODO("day04: layernorm.cpp, check_x: x has shape [..., D] with D >= 1, a float dtype and a CPU or CUDA device, then delete this line");
// x: at least one dimension, 1 <= D < 2^31 (the kernels index a row with int), float16,
// bfloat16, float32 or float64, on the CPU or a GPU; any strides.
void check_x(const char* op, const at::Tensor& x) {
  // TODO(day04): one TORCH_CHECK per rule above, each naming x and what it got, e.g.
  //   TORCH_CHECK(x.dim() >= 1, op, ": x must have shape [..., D], got a 0-dim tensor");
  // is_float_type() tells the four float dtypes from the rest.
}

COURSE_TODO("day04: layernorm.cpp, check_forward_inputs: check x, normalized_shape, gamma, beta and eps, then delete this line");
void check_forward_inputs(const at::Tensor& x, at::IntArrayRef normalized_shape, const at::Tensor& gamma,
                          const at::Tensor& beta, double eps) {
  constexpr const char* op = "layernorm forward";
  // TODO(day04): check_x(op, x); then normalized_shape must be [x.size(-1)] (one dimension,
  // x's last); gamma and beta must be like x (check_like_x: same device, x's dtype, shape [D]);
  // eps must be finite and > 0 (NaN fails every comparison: test std::isfinite(eps) first).
}

COURSE_TODO("day04: layernorm.cpp, check_backward_inputs: check dy, x, gamma, mean and rstd, then delete this line");
void check_backward_inputs(const at::Tensor& dy, const at::Tensor& x, const at::Tensor& gamma,
                           const at::Tensor& mean, const at::Tensor& rstd) {
  constexpr const char* op = "layernorm backward";
  // TODO(day04): check_x for x; check_like_x for dy (x's dtype and shape), gamma (x's dtype,
  // [D]), mean and rstd (stats_dtype(x.scalar_type()), batch_shape(x)).
}

// ---- the CPU path: the kernels' algorithms, a row at a time ----

// Σ term(j) for j in [begin, end), added pairwise. The rounding error of a sum in float grows
// with the number of additions each term goes through: D in a plain loop, log2(D) here, as in
// the kernels' block reductions. At mean 1e4, D = 1024, a plain loop's error in the mean is
// about the row's whole spread.
template <typename acc_t, typename Term>
acc_t pairwise_sum(int64_t begin, int64_t end, const Term& term) {
  if (end - begin <= 16) {
    acc_t sum = 0;
    for (int64_t j = begin; j < end; ++j) sum += term(j);
    return sum;
  }
  const int64_t middle = begin + (end - begin) / 2;
  return pairwise_sum<acc_t>(begin, middle, term) + pairwise_sum<acc_t>(middle, end, term);
}

// Sums run in at::opmath_type: float for the half types and float, double for double, the
// kernels' acc_type_t. Same algorithm and same precision as on the GPU.
void forward_cpu(const at::Tensor& x, const at::Tensor& gamma, const at::Tensor& beta, double eps,
                 int64_t rows, int64_t cols, at::Tensor& y, at::Tensor& mean, at::Tensor& rstd) {
  AT_DISPATCH_FLOATING_TYPES_AND2(at::kHalf, at::kBFloat16, x.scalar_type(), "layernorm_forward_cpu", [&] {
    using acc_t = at::opmath_type<scalar_t>;
    const scalar_t* x_p = x.const_data_ptr<scalar_t>();
    const scalar_t* gamma_p = gamma.const_data_ptr<scalar_t>();
    const scalar_t* beta_p = beta.const_data_ptr<scalar_t>();
    scalar_t* y_p = y.data_ptr<scalar_t>();
    acc_t* mean_p = mean.data_ptr<acc_t>();
    acc_t* rstd_p = rstd.data_ptr<acc_t>();
    at::parallel_for(0, rows, 1, [&](int64_t begin, int64_t end) {
      for (int64_t row = begin; row < end; ++row) {
        const scalar_t* x_row = x_p + row * cols;
        scalar_t* y_row = y_p + row * cols;
        const acc_t mu = pairwise_sum<acc_t>(0, cols, [&](int64_t j) { return acc_t(x_row[j]); }) / cols;
        const acc_t var = pairwise_sum<acc_t>(0, cols, [&](int64_t j) {
          const acc_t centered = acc_t(x_row[j]) - mu;
          return centered * centered;
        }) / cols;
        const acc_t r = acc_t(1) / std::sqrt(var + static_cast<acc_t>(eps));
        for (int64_t j = 0; j < cols; ++j) {
          y_row[j] = static_cast<scalar_t>((acc_t(x_row[j]) - mu) * r * acc_t(gamma_p[j]) + acc_t(beta_p[j]));
        }
        mean_p[row] = mu;
        rstd_p[row] = r;
      }
    });
  });
}

// dx per row, as the dx kernel; dgamma and dbeta in the kernels' strips: each strip adds its
// rows into its own row of partials, then the strips are added per column, in order. Fixed
// strips (not one per thread) keep the result the same on any number of threads.
void backward_cpu(const at::Tensor& dy, const at::Tensor& x, const at::Tensor& gamma,
                  const at::Tensor& mean, const at::Tensor& rstd, int64_t rows, int64_t cols,
                  at::Tensor& dx, at::Tensor& dgamma, at::Tensor& dbeta) {
  AT_DISPATCH_FLOATING_TYPES_AND2(at::kHalf, at::kBFloat16, x.scalar_type(), "layernorm_backward_cpu", [&] {
    using acc_t = at::opmath_type<scalar_t>;
    const scalar_t* dy_p = dy.const_data_ptr<scalar_t>();
    const scalar_t* x_p = x.const_data_ptr<scalar_t>();
    const scalar_t* gamma_p = gamma.const_data_ptr<scalar_t>();
    const acc_t* mean_p = mean.const_data_ptr<acc_t>();
    const acc_t* rstd_p = rstd.const_data_ptr<acc_t>();

    if (dx.defined()) {
      scalar_t* dx_p = dx.data_ptr<scalar_t>();
      at::parallel_for(0, rows, 1, [&](int64_t begin, int64_t end) {
        for (int64_t row = begin; row < end; ++row) {
          const int64_t row_start = row * cols;
          const auto g = [&](int64_t j) { return acc_t(dy_p[row_start + j]) * acc_t(gamma_p[j]); };
          const auto xhat = [&](int64_t j) { return (acc_t(x_p[row_start + j]) - mean_p[row]) * rstd_p[row]; };
          const acc_t mean_g = pairwise_sum<acc_t>(0, cols, g) / cols;
          const acc_t mean_g_xhat = pairwise_sum<acc_t>(0, cols, [&](int64_t j) { return g(j) * xhat(j); }) / cols;
          for (int64_t j = 0; j < cols; ++j) {
            dx_p[row_start + j] = static_cast<scalar_t>(rstd_p[row] * (g(j) - mean_g - xhat(j) * mean_g_xhat));
          }
        }
      });
    }

    if (dgamma.defined()) {
      const int64_t strips = num_param_strips(rows);
      const int64_t strip_rows = rows_per_param_strip(rows);
      auto partials = at::zeros({2, strips, cols}, x.options().dtype(stats_dtype(x.scalar_type())));
      acc_t* partial_dgamma = partials.data_ptr<acc_t>();
      acc_t* partial_dbeta = partial_dgamma + strips * cols;
      at::parallel_for(0, strips, 1, [&](int64_t begin, int64_t end) {
        for (int64_t strip = begin; strip < end; ++strip) {
          for (int64_t row = strip * strip_rows; row < std::min(rows, (strip + 1) * strip_rows); ++row) {
            for (int64_t j = 0; j < cols; ++j) {
              const acc_t dy_value = dy_p[row * cols + j];
              partial_dgamma[strip * cols + j] += dy_value * (acc_t(x_p[row * cols + j]) - mean_p[row]) * rstd_p[row];
              partial_dbeta[strip * cols + j] += dy_value;
            }
          }
        }
      });
      scalar_t* dgamma_p = dgamma.data_ptr<scalar_t>();
      scalar_t* dbeta_p = dbeta.data_ptr<scalar_t>();
      for (int64_t j = 0; j < cols; ++j) {
        acc_t dgamma_sum = 0;
        acc_t dbeta_sum = 0;
        for (int64_t strip = 0; strip < strips; ++strip) {
          dgamma_sum += partial_dgamma[strip * cols + j];
          dbeta_sum += partial_dbeta[strip * cols + j];
        }
        dgamma_p[j] = static_cast<scalar_t>(dgamma_sum);
        dbeta_p[j] = static_cast<scalar_t>(dbeta_sum);
      }
    }
  });
}

// ---- the CUDA path: raw pointers and the current stream for the launchers ----

COURSE_TODO_CUDA("day04: layernorm.cpp, forward_cuda: dispatch on all four float types and call launch_layernorm_forward with cuda_ptr, then delete this line");
void forward_cuda(const at::Tensor& x, const at::Tensor& gamma, const at::Tensor& beta, double eps,
                  int64_t rows, int64_t cols, at::Tensor& y, at::Tensor& mean, at::Tensor& rstd) {
  const c10::cuda::CUDAGuard device_guard(x.device());  // launch on x's GPU, not GPU 0
  // TODO(day04): like backward_cuda below: AT_DISPATCH_FLOATING_TYPES_AND2(at::kHalf,
  // at::kBFloat16, ...) instantiates the lambda for all four types; inside it, pass
  // cuda_ptr<scalar_t>(tensor) for x, gamma, beta and y (__half* where the tensor holds
  // at::Half), mean.data_ptr<at::opmath_type<scalar_t>>() for the statistics, and the current
  // stream; TORCH_CHECK the error it returns.
}

// dx, dgamma and dbeta are allocated; an undefined one (not asked for) is not computed.
// dgamma and dbeta are defined together.
void backward_cuda(const at::Tensor& dy, const at::Tensor& x, const at::Tensor& gamma,
                   const at::Tensor& mean, const at::Tensor& rstd, int64_t rows, int64_t cols,
                   at::Tensor& dx, at::Tensor& dgamma, at::Tensor& dbeta) {
  const c10::cuda::CUDAGuard device_guard(x.device());
  const cudaStream_t stream = c10::cuda::getCurrentCUDAStream();
  AT_DISPATCH_FLOATING_TYPES_AND2(at::kHalf, at::kBFloat16, x.scalar_type(), "layernorm_backward_cuda", [&] {
    using stats_t = at::opmath_type<scalar_t>;
    if (dx.defined()) {
      const cudaError_t error = launch_layernorm_backward_dx(
          cuda_ptr<scalar_t>(dy), cuda_ptr<scalar_t>(x), cuda_ptr<scalar_t>(gamma), mean.const_data_ptr<stats_t>(),
          rstd.const_data_ptr<stats_t>(), cuda_ptr<scalar_t>(dx), rows, cols, stream);
      TORCH_CHECK(error == cudaSuccess, "layernorm backward: dx kernel launch failed: ", cudaGetErrorString(error));
    }
    if (dgamma.defined()) {
      // Freed when this returns, with the kernels perhaps still running: safe, because the
      // caching allocator hands it out again only to work queued after them on this stream.
      auto partials = at::empty({2, num_param_strips(rows), padded_param_columns(cols)}, mean.options());
      const cudaError_t error = launch_layernorm_backward_params(
          cuda_ptr<scalar_t>(dy), cuda_ptr<scalar_t>(x), mean.const_data_ptr<stats_t>(),
          rstd.const_data_ptr<stats_t>(), partials.data_ptr<stats_t>(), cuda_ptr<scalar_t>(dgamma),
          cuda_ptr<scalar_t>(dbeta), rows, cols, stream);
      TORCH_CHECK(error == cudaSuccess, "layernorm backward: dgamma/dbeta kernel launch failed: ",
                  cudaGetErrorString(error));
    }
  });
}

// ---- the ops ----

std::tuple<at::Tensor, at::Tensor, at::Tensor> forward(const at::Tensor& x_any_layout,
                                                       const std::vector<int64_t>& normalized_shape,
                                                       const at::Tensor& gamma_any_layout,
                                                       const at::Tensor& beta_any_layout, double eps) {
  // Refused while a function this call runs is unwritten: the checks, then x's path.
  COURSE_REFUSE_UNFINISHED(x_any_layout, "check_x", "check_forward_inputs");
  check_forward_inputs(x_any_layout, normalized_shape, gamma_any_layout, beta_any_layout, eps);
  COURSE_REFUSE_UNFINISHED(x_any_layout, "row_major, num_rows and batch_shape", "forward_cuda");
  const at::Tensor x = row_major(x_any_layout);
  const at::Tensor gamma = row_major(gamma_any_layout);
  const at::Tensor beta = row_major(beta_any_layout);
  const int64_t rows = num_rows(x);
  const int64_t cols = x.size(-1);
  auto y = at::empty(x.sizes(), x.options());  // row-major, whatever x's strides were
  const auto stats_options = x.options().dtype(stats_dtype(x.scalar_type()));
  auto mean = at::empty(batch_shape(x), stats_options);
  auto rstd = at::empty(batch_shape(x), stats_options);
  if (x.is_cuda()) {
    forward_cuda(x, gamma, beta, eps, rows, cols, y, mean, rstd);
  } else {
    forward_cpu(x, gamma, beta, eps, rows, cols, y, mean, rstd);
  }
  return {y, mean, rstd};
}

std::tuple<at::Tensor, at::Tensor, at::Tensor> backward(const at::Tensor& dy_any_layout,
                                                        const at::Tensor& x_any_layout,
                                                        const at::Tensor& gamma_any_layout,
                                                        const at::Tensor& mean_any_layout,
                                                        const at::Tensor& rstd_any_layout,
                                                        std::array<bool, 3> output_mask) {
  COURSE_REFUSE_UNFINISHED(x_any_layout, "check_x", "check_backward_inputs",  // and batch_shape, which it uses
                           "row_major, num_rows and batch_shape");
  check_backward_inputs(dy_any_layout, x_any_layout, gamma_any_layout, mean_any_layout, rstd_any_layout);
  // dy comes from whatever op follows LayerNorm (a transpose's backward hands over a
  // transposed view), and x is the caller's own tensor, saved by forward as it came.
  const at::Tensor dy = row_major(dy_any_layout);
  const at::Tensor x = row_major(x_any_layout);
  const at::Tensor gamma = row_major(gamma_any_layout);
  const at::Tensor mean = row_major(mean_any_layout);
  const at::Tensor rstd = row_major(rstd_any_layout);
  const int64_t rows = num_rows(x);
  const int64_t cols = x.size(-1);
  const auto [want_dx, want_dgamma, want_dbeta] = output_mask;
  const bool want_params = want_dgamma || want_dbeta;  // both come out of the same two kernels
  at::Tensor dx = want_dx ? at::empty(x.sizes(), x.options()) : at::Tensor();
  at::Tensor dgamma = want_params ? at::empty({cols}, x.options()) : at::Tensor();
  at::Tensor dbeta = want_params ? at::empty({cols}, x.options()) : at::Tensor();
  if (x.is_cuda()) {
    backward_cuda(dy, x, gamma, mean, rstd, rows, cols, dx, dgamma, dbeta);
  } else {
    backward_cpu(dy, x, gamma, mean, rstd, rows, cols, dx, dgamma, dbeta);
  }
  // An undefined tensor reaches Python as None.
  return {dx, want_dgamma ? dgamma : at::Tensor(), want_dbeta ? dbeta : at::Tensor()};
}

}  // namespace

PYBIND11_MODULE(TORCH_EXTENSION_NAME, m) {
  m.doc() = "LayerNorm over the last dimension, forward and backward, for any shape, strides and float dtype (day04)";
  m.def("forward", &forward,
        "LayerNorm forward: (y, mean, rstd) = forward(x, normalized_shape, gamma, beta, eps), "
        "normalized_shape = [x.shape[-1]]",
        pybind11::arg("x"), pybind11::arg("normalized_shape"), pybind11::arg("gamma"), pybind11::arg("beta"),
        pybind11::arg("eps"));
  m.def("backward", &backward,
        "LayerNorm backward: (dx, dgamma, dbeta) = backward(dy, x, gamma, mean, rstd, output_mask); "
        "output_mask says which of the three to compute (the others are None)",
        pybind11::arg("dy"), pybind11::arg("x"), pybind11::arg("gamma"), pybind11::arg("mean"),
        pybind11::arg("rstd"), pybind11::arg("output_mask") = std::array<bool, 3>{true, true, true});
}

// LayerNorm over the last dimension on the GPU, with the kernel version chosen by name, so
// that the notebook, the tests and the benchmark can run each version on the same input.
//
// forward(x [..., D], gamma [D], beta [D], eps, kernel = "auto") -> (y [..., D], mean [...], rstd [...])
//     kernel: "block_per_row" (day04), "warp_per_row", "vectorized", "registers"; "auto" = "registers"
// backward(dy [..., D], x, gamma, mean, rstd, kernel = "auto") -> (dx, dgamma, dbeta)
//     kernel: "two_pass" (day04's three kernels), "fused"; "auto" = "fused"
//
// A version that cannot take a shape runs the one before it (see layernorm_fast.h). Today is
// about the kernels: x and dy must be contiguous CUDA tensors of float16, bfloat16, float32 or
// float64 (layer_norm in layernorm.py hands any tensor over in that form); day04's op remains
// the one for every other input.
#include <ATen/ATen.h>
#include <ATen/OpMathType.h>
#include <torch/csrc/utils/pybind.h>

#include <c10/cuda/CUDAGuard.h>
#include <c10/cuda/CUDAStream.h>

#include <algorithm>
#include <string>
#include <vector>

#include "course_todo.h"
#include "cuda_ptr.h"
#include "layernorm_fast.h"

namespace {

constexpr int64_t kMaxCols = int64_t{1} << 30;
const std::vector<std::string> kForwardKernels = {"auto", "block_per_row", "warp_per_row", "vectorized", "registers"};
const std::vector<std::string> kBackwardKernels = {"auto", "two_pass", "fused"};

std::string joined(const std::vector<std::string>& names) {
  std::string text;
  for (const auto& name : names) text += (text.empty() ? "\"" : ", \"") + name + "\"";
  return text;
}

void check_kernel(const char* op, const std::string& kernel, const std::vector<std::string>& known) {
  TORCH_CHECK(std::find(known.begin(), known.end(), kernel) != known.end(), op, ": kernel must be one of ",
              joined(known), ", got \"", kernel, "\"");
}

void check_rows(const char* op, const char* name, const at::Tensor& t) {
  TORCH_CHECK(t.is_cuda(), op, ": ", name, " must be a CUDA tensor (today's kernels run on the GPU), got one on ",
              t.device());
  TORCH_CHECK(t.dim() >= 1 && t.size(-1) >= 1, op, ": ", name, " must have shape [..., D] with D >= 1, got ",
              t.sizes());
  const auto dtype = t.scalar_type();
  TORCH_CHECK(dtype == at::kHalf || dtype == at::kBFloat16 || dtype == at::kFloat || dtype == at::kDouble, op, ": ",
              name, " must be float16, bfloat16, float32 or float64, got ", dtype);
  TORCH_CHECK(t.is_contiguous(), op, ": ", name, " must be contiguous (call .contiguous() first)");
  // Column indices are int, and a loop index may step up to a block's width past D.
  TORCH_CHECK(t.size(-1) <= kMaxCols, op, ": ", name, "'s last dimension must be at most 2^30, got ", t.size(-1));
}

void check_like(const char* op, const char* name, const at::Tensor& t, const at::Tensor& x,
                at::IntArrayRef shape, at::ScalarType dtype) {
  TORCH_CHECK(t.device() == x.device(), op, ": ", name, " must be on x's device ", x.device(), ", got ", t.device());
  TORCH_CHECK(t.sizes() == shape, op, ": ", name, " must have shape ", shape, ", got ", t.sizes());
  TORCH_CHECK(t.scalar_type() == dtype, op, ": ", name, " must have dtype ", dtype, ", got ", t.scalar_type());
  TORCH_CHECK(t.is_contiguous(), op, ": ", name, " must be contiguous (call .contiguous() first)");
}

std::tuple<at::Tensor, at::Tensor, at::Tensor> forward(const at::Tensor& x, const at::Tensor& gamma,
                                                       const at::Tensor& beta, double eps,
                                                       const std::string& kernel) {
  check_kernel("forward", kernel, kForwardKernels);
  // Refused while a version this call may run is unwritten: version 2, or version 3 and the
  // version 2 it hands rows to. Version 4 ("auto") hands version 3 float64, rows of more than 32
  // elements that are not whole aligned vectors, and rows too long for the split this GPU can
  // launch: it waits on both, whatever the shape.
  if (kernel == "warp_per_row") {
    COURSE_REFUSE_UNFINISHED(x, "layernorm_forward_warp_kernel");
  } else if (kernel != "block_per_row") {
    COURSE_REFUSE_UNFINISHED(x, "layernorm_forward_vectorized_kernel", "launch_layernorm_forward_vectorized",
                             "layernorm_forward_warp_kernel");
  }
  check_rows("forward", "x", x);
  const int64_t cols = x.size(-1);
  check_like("forward", "gamma", gamma, x, {cols}, x.scalar_type());
  check_like("forward", "beta", beta, x, {cols}, x.scalar_type());
  TORCH_CHECK(eps > 0, "forward: eps must be > 0, got ", eps);

  const int64_t rows = x.numel() / cols;
  const auto batch = x.sizes().slice(0, x.dim() - 1);
  auto y = at::empty_like(x);
  const auto stats_options = x.options().dtype(at::toOpMathType(x.scalar_type()));
  auto mean = at::empty(batch, stats_options);
  auto rstd = at::empty(batch, stats_options);
  const c10::cuda::CUDAGuard device_guard(x.device());
  const cudaStream_t stream = c10::cuda::getCurrentCUDAStream();
  AT_DISPATCH_FLOATING_TYPES_AND2(at::kHalf, at::kBFloat16, x.scalar_type(), "layernorm_forward", [&] {
    using stats_t = at::opmath_type<scalar_t>;
    auto launch = &launch_layernorm_forward_registers<typename CudaType<scalar_t>::type>;
    if (kernel == "block_per_row") launch = &launch_layernorm_forward<typename CudaType<scalar_t>::type>;
    if (kernel == "warp_per_row") launch = &launch_layernorm_forward_warp<typename CudaType<scalar_t>::type>;
    if (kernel == "vectorized") launch = &launch_layernorm_forward_vectorized<typename CudaType<scalar_t>::type>;
    const cudaError_t error = launch(cuda_ptr<scalar_t>(x), cuda_ptr<scalar_t>(gamma), cuda_ptr<scalar_t>(beta),
                                     cuda_ptr<scalar_t>(y), mean.data_ptr<stats_t>(), rstd.data_ptr<stats_t>(), rows,
                                     cols, eps, stream);
    TORCH_CHECK(error == cudaSuccess, "forward (", kernel, "): kernel launch failed: ", cudaGetErrorString(error));
  });
  return {y, mean, rstd};
}

std::tuple<at::Tensor, at::Tensor, at::Tensor> backward(const at::Tensor& dy, const at::Tensor& x,
                                                        const at::Tensor& gamma, const at::Tensor& mean,
                                                        const at::Tensor& rstd, const std::string& kernel) {
  // Both versions of the backward are given: nothing to refuse.
  check_kernel("backward", kernel, kBackwardKernels);
  check_rows("backward", "x", x);
  const int64_t cols = x.size(-1);
  const auto batch = x.sizes().slice(0, x.dim() - 1);
  const auto stats_dtype = at::toOpMathType(x.scalar_type());
  check_like("backward", "dy", dy, x, x.sizes(), x.scalar_type());
  check_like("backward", "gamma", gamma, x, {cols}, x.scalar_type());
  check_like("backward", "mean", mean, x, batch, stats_dtype);
  check_like("backward", "rstd", rstd, x, batch, stats_dtype);

  const int64_t rows = x.numel() / cols;
  auto dx = at::empty_like(x);
  auto dgamma = at::empty({cols}, x.options());
  auto dbeta = at::empty({cols}, x.options());
  const c10::cuda::CUDAGuard device_guard(x.device());
  const cudaStream_t stream = c10::cuda::getCurrentCUDAStream();
  AT_DISPATCH_FLOATING_TYPES_AND2(at::kHalf, at::kBFloat16, x.scalar_type(), "layernorm_backward", [&] {
    using T = typename CudaType<scalar_t>::type;
    using stats_t = at::opmath_type<scalar_t>;
    const T* dy_ptr = cuda_ptr<scalar_t>(dy);
    const T* x_ptr = cuda_ptr<scalar_t>(x);
    const T* gamma_ptr = cuda_ptr<scalar_t>(gamma);
    const stats_t* mean_ptr = mean.const_data_ptr<stats_t>();
    const stats_t* rstd_ptr = rstd.const_data_ptr<stats_t>();
    const bool aligned = is_aligned(dy_ptr) && is_aligned(x_ptr) && is_aligned(gamma_ptr) && is_aligned(dx.data_ptr());
    const int64_t fused_blocks = kernel == "two_pass" ? 0 : layernorm_backward_fused_blocks<T>(rows, cols, aligned);
    cudaError_t error = cudaSuccess;
    if (fused_blocks > 0) {
      // Freed on return with the kernels perhaps still running: safe, the caching allocator
      // hands it out again only to work queued after them on this stream.
      auto partials = at::empty({2, fused_blocks, cols}, mean.options());
      error = launch_layernorm_backward_fused(dy_ptr, x_ptr, gamma_ptr, mean_ptr, rstd_ptr, cuda_ptr<scalar_t>(dx),
                                              partials.data_ptr<stats_t>(), cuda_ptr<scalar_t>(dgamma),
                                              cuda_ptr<scalar_t>(dbeta), rows, cols, stream);
    } else {
      error = launch_layernorm_backward_dx(dy_ptr, x_ptr, gamma_ptr, mean_ptr, rstd_ptr, cuda_ptr<scalar_t>(dx), rows,
                                           cols, stream);
      if (error == cudaSuccess) {
        auto partials = at::empty({2, num_param_strips(rows), padded_param_columns(cols)}, mean.options());
        error = launch_layernorm_backward_params(dy_ptr, x_ptr, mean_ptr, rstd_ptr, partials.data_ptr<stats_t>(),
                                                 cuda_ptr<scalar_t>(dgamma), cuda_ptr<scalar_t>(dbeta), rows, cols,
                                                 stream);
      }
    }
    TORCH_CHECK(error == cudaSuccess, "backward (", kernel, "): kernel launch failed: ", cudaGetErrorString(error));
  });
  return {dx, dgamma, dbeta};
}

}  // namespace

PYBIND11_MODULE(TORCH_EXTENSION_NAME, m) {
  m.doc() = "LayerNorm forward and backward on the GPU, one function per op, the kernel version by name (day05)";
  m.def("forward", &forward, "(y, mean, rstd) = forward(x, gamma, beta, eps, kernel='auto'); x contiguous, on the GPU",
        pybind11::arg("x"), pybind11::arg("gamma"), pybind11::arg("beta"), pybind11::arg("eps"),
        pybind11::arg("kernel") = "auto");
  m.def("backward", &backward,
        "(dx, dgamma, dbeta) = backward(dy, x, gamma, mean, rstd, kernel='auto'); dy and x contiguous, on the GPU",
        pybind11::arg("dy"), pybind11::arg("x"), pybind11::arg("gamma"), pybind11::arg("mean"), pybind11::arg("rstd"),
        pybind11::arg("kernel") = "auto");
  m.attr("FORWARD_KERNELS") = kForwardKernels;
  m.attr("BACKWARD_KERNELS") = kBackwardKernels;
}

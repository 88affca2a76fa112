// LayerNorm forward: the op as Python sees it.
//
// forward(x [B, D], gamma [D], beta [D], eps) -> (y [B, D], mean [B], rstd [B])
//
// This file checks the inputs, allocates the outputs and sends the work to the
// CPU loop below or to the CUDA launcher in layernorm_forward.cu.
// ATen and the pybind11 glue are all this file needs: torch/extension.h would add the
// whole C++ frontend (modules, optimizers) and double the time this file takes to compile.
#include <ATen/ATen.h>
#include <ATen/Parallel.h>
#include <torch/csrc/utils/pybind.h>

#include <c10/cuda/CUDAGuard.h>
#include <c10/cuda/CUDAStream.h>

#include <cmath>

#include "course_todo.h"
#include "layernorm_forward.h"

namespace {

COURSE_TODO("day02: layernorm.cpp, check_inputs: check device, dtype, layout, shapes and eps, each with a message naming the argument, then delete this line");
// Every message names the argument and says what was expected.
void check_inputs(const at::Tensor& x, const at::Tensor& gamma, const at::Tensor& beta,
                  double eps) {
  // TODO(day02): one TORCH_CHECK per requirement, e.g.
  //   TORCH_CHECK(x.dim() == 2, "layernorm forward: x must be 2-D [B, D], got shape ", x.sizes());
}

COURSE_TODO_CPU("day02: layernorm.cpp, forward_cpu: the same two-pass math as the kernel, one row at a time, then delete this line");
// The reference loop on the CPU: rows in parallel, two passes per row.
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
        // TODO(day02): mean, variance around the mean, then y, mean_a[row] and rstd_a[row].
      }
    });
  });
}

COURSE_TODO_CUDA("day02: layernorm.cpp, forward_cuda: call launch_layernorm_forward on the current stream and check its error, then delete this line");
void forward_cuda(const at::Tensor& x, const at::Tensor& gamma, const at::Tensor& beta,
                  double eps, at::Tensor& y, at::Tensor& mean, at::Tensor& rstd) {
  const c10::cuda::CUDAGuard device_guard(x.device());  // launch on x's GPU, not GPU 0
  // TODO(day02): dispatch on dtype, pass data_ptr<scalar_t>() of each tensor and
  // c10::cuda::getCurrentCUDAStream() to launch_layernorm_forward, and check the error it returns.
}

std::tuple<at::Tensor, at::Tensor, at::Tensor> forward(const at::Tensor& x,
                                                               const at::Tensor& gamma,
                                                               const at::Tensor& beta,
                                                               double eps) {
  // Refused while a function this call runs is unwritten: the checks, then x's path.
  COURSE_REFUSE_UNFINISHED(x, "check_inputs");
  check_inputs(x, gamma, beta, eps);
  COURSE_REFUSE_UNFINISHED(x, "forward_cpu", "forward_cuda", "layernorm_forward_kernel", "warp_reduce_sum");
  auto y = at::empty_like(x);
  auto mean = at::empty({x.size(0)}, x.options());
  auto rstd = at::empty({x.size(0)}, x.options());
  if (x.is_cuda()) {
    forward_cuda(x, gamma, beta, eps, y, mean, rstd);
  } else {
    forward_cpu(x, gamma, beta, eps, y, mean, rstd);
  }
  return {y, mean, rstd};
}

}  // namespace

PYBIND11_MODULE(TORCH_EXTENSION_NAME, m) {
  m.doc() = "LayerNorm forward (day02)";
  m.def("forward", &forward, "LayerNorm forward: (y, mean, rstd) = forward(x, gamma, beta, eps)",
        pybind11::arg("x"), pybind11::arg("gamma"), pybind11::arg("beta"), pybind11::arg("eps"));
}

// RMSNorm and RMSNorm + INT8 quantization as PyTorch operators, rmsnorm_int8::*, registered as
// on day 7: schemas with TORCH_LIBRARY, a kernel per backend with TORCH_LIBRARY_IMPL, the
// autograd formula in C++, the fake kernels in Python (rmsnorm_int8.py).
//
//   rms_norm(x [..., D], weight [D]?, eps) -> (y, rstd [...])   rstd float32 (float64 for float64 x)
//   rms_norm_backward(dy, x, weight?, rstd) -> (dx, dweight [D])
//   rms_norm_quant(x, weight, eps) -> (q int8 [..., D], scale float32 [...])
//   add_rms_norm_quant(x, residual!, weight, eps) -> (q, scale)        residual += x, in place
//
// add_rms_norm_quant writes one of its arguments, and its schema says so: `Tensor(a!)`. A
// schema that hides a mutation lets torch.compile reorder or drop the write.
//
// CPU: the math in ATen ops, in float32 (float64 for float64 x). CUDA: today's kernels, on
// float16, bfloat16 and float32 rows: of any length for rms_norm, of up to kMaxCols elements
// for the quantization.
#include <ATen/ATen.h>
#include <ATen/OpMathType.h>
#include <c10/cuda/CUDAGuard.h>
#include <c10/cuda/CUDAStream.h>
#include <torch/library.h>

#include <cmath>
#include <cstdint>
#include <optional>
#include <tuple>
#include <type_traits>

#include "autograd_node.h"
#include "course_todo.h"
#include "cuda_ptr.h"
#include "rmsnorm_kernels.h"

namespace {

using Pair = std::tuple<at::Tensor, at::Tensor>;

// ---- checks both devices share: each message names the op, the argument and what was expected ----

void check_x(const char* op, const at::Tensor& x, bool quantized) {
  TORCH_CHECK(x.dim() >= 1 && x.size(-1) >= 1, op, ": x must have shape [..., D] with D >= 1, got ", x.sizes());
  const auto dtype = x.scalar_type();
  const bool float64 = dtype == at::kDouble && !x.is_cuda() && !quantized;  // gradcheck's, on the CPU
  TORCH_CHECK(dtype == at::kHalf || dtype == at::kBFloat16 || dtype == at::kFloat || float64, op,
              ": x must be float16, bfloat16 or float32", quantized || x.is_cuda() ? "" : " (or float64)", ", got ",
              dtype);
  if (!x.is_cuda() || !quantized) return;  // rms_norm's kernels take rows of any length
  const int64_t cols = x.size(-1), vec = 16 / x.element_size();
  TORCH_CHECK(cols <= kMaxCols, op, ": x's last dimension D must be at most ", kMaxCols, " on CUDA, got ", cols);
  TORCH_CHECK(cols % vec == 0 || cols <= kMaxScalarCols, op, ": x's last dimension D must be a multiple of ", vec,
              " (whole 16-byte vectors) when it exceeds ", kMaxScalarCols, " on CUDA, got ", cols);
}

// Contiguous, at a 16-byte address: a misaligned view is copied to fresh memory, so that the
// kernels can take its rows as vectors.
at::Tensor aligned_contiguous(const at::Tensor& t) {
  const at::Tensor c = t.contiguous();
  return reinterpret_cast<std::uintptr_t>(c.data_ptr()) % 16 == 0 ? c : c.clone();
}

void check_eps(const char* op, double eps) {
  TORCH_CHECK(eps >= 0 && std::isfinite(eps), op, ": eps must be finite and >= 0, got ", eps);
}

// `tensor` must be on x's device, of x's dtype and of shape `shape`.
void check_like(const char* op, const char* name, const at::Tensor& tensor, const at::Tensor& x,
                at::IntArrayRef shape, at::ScalarType dtype) {
  TORCH_CHECK(tensor.device() == x.device(), op, ": ", name, " must be on x's device ", x.device(), ", got ",
              tensor.device());
  TORCH_CHECK(tensor.sizes() == shape, op, ": ", name, " must have shape ", shape, ", got ", tensor.sizes());
  TORCH_CHECK(tensor.scalar_type() == dtype, op, ": ", name, " must have dtype ", dtype, ", got ",
              tensor.scalar_type());
}

// The weight as a contiguous [D] tensor, or an undefined tensor where the caller passed none.
at::Tensor weight_or_none(const char* op, const std::optional<at::Tensor>& weight, const at::Tensor& x) {
  if (!weight.has_value() || !weight->defined()) return at::Tensor();
  check_like(op, "weight", *weight, x, {x.size(-1)}, x.scalar_type());
  return aligned_contiguous(*weight);
}

at::ScalarType acc_dtype(const at::Tensor& x) { return at::toOpMathType(x.scalar_type()); }

at::IntArrayRef batch_shape(const at::Tensor& x) { return x.sizes().slice(0, x.dim() - 1); }

int64_t rows_of(const at::Tensor& x) { return x.numel() / x.size(-1); }

// ---- the CPU kernels: ATen ops in acc_dtype(x) ----

Pair forward_cpu(const at::Tensor& x, const std::optional<at::Tensor>& weight, double eps) {
  check_x("rms_norm", x, false);
  check_eps("rms_norm", eps);
  const at::Tensor w = weight_or_none("rms_norm", weight, x);
  const at::Tensor xs = x.to(acc_dtype(x));
  const at::Tensor rstd = (xs.square().mean(-1) + eps).rsqrt();
  at::Tensor y = xs * rstd.unsqueeze(-1);
  if (w.defined()) y = y * w.to(xs.scalar_type());
  return {y.to(x.scalar_type()).contiguous(), rstd};
}

Pair backward_cpu(const at::Tensor& dy, const at::Tensor& x, const std::optional<at::Tensor>& weight,
                  const at::Tensor& rstd) {
  check_x("rms_norm_backward", x, false);
  check_like("rms_norm_backward", "dy", dy, x, x.sizes(), x.scalar_type());
  check_like("rms_norm_backward", "rstd", rstd, x, batch_shape(x), acc_dtype(x));
  const at::Tensor w = weight_or_none("rms_norm_backward", weight, x);
  const auto acc = acc_dtype(x);
  const at::Tensor r = rstd.unsqueeze(-1);
  const at::Tensor xhat = x.to(acc) * r;
  const at::Tensor dys = dy.to(acc);
  const at::Tensor g = w.defined() ? dys * w.to(acc) : dys;
  const at::Tensor dx = r * (g - xhat * (g * xhat).mean(-1, true));
  const at::Tensor dweight = (dys * xhat).reshape({-1, x.size(-1)}).sum(0);
  return {dx.to(x.scalar_type()).contiguous(), dweight.to(x.scalar_type())};
}

// y in float (any shape [..., D]) -> (q, scale): scale = max|y| / 127 per row,
// q = clamp(round(y / scale), -127, 127), round half to even; a row of zeros gets 0 and 0.
// BEGIN SOLUTION
Pair quantize_rows_cpu(const at::Tensor& y) {
  const at::Tensor scale = y.abs().amax(-1) / 127.0;
  const at::Tensor safe = at::where(scale == 0, at::ones_like(scale), scale).unsqueeze(-1);
  const at::Tensor q = at::where(scale.unsqueeze(-1) == 0, at::zeros_like(y), at::round(y / safe));
  return {q.clamp(-127, 127).to(at::kChar), scale.to(at::kFloat)};
}
// STUB
COURSE_TODO_CPU("day09: rmsnorm_ops.cpp, quantize_rows_cpu: scale = max|y| / 127 per row and q = clamp(round(y / scale), -127, 127) as int8, 0 where the scale is 0, in ATen ops, then delete this line");

Pair quantize_rows_cpu(const at::Tensor& y) {
  // TODO(day09): at::round rounds half to even, as the kernels must
  return {at::zeros(y.sizes(), y.options().dtype(at::kChar)), at::zeros(batch_shape(y), y.options())};
}
// END SOLUTION

Pair quant_cpu(const at::Tensor& x, const at::Tensor& weight, double eps) {
  const at::Tensor xs = x.to(at::kFloat);
  const at::Tensor rstd = (xs.square().mean(-1, true) + eps).rsqrt();
  return quantize_rows_cpu(xs * rstd * weight.to(at::kFloat));
}

void check_quant(const char* op, const at::Tensor& x, const at::Tensor& weight, double eps) {
  check_x(op, x, true);
  check_eps(op, eps);
  check_like(op, "weight", weight, x, {x.size(-1)}, x.scalar_type());
}

void check_residual(const at::Tensor& x, const at::Tensor& residual) {
  check_like("add_rms_norm_quant", "residual", residual, x, x.sizes(), x.scalar_type());
  TORCH_CHECK(residual.is_contiguous(), "add_rms_norm_quant: residual must be contiguous (it is updated in place), ",
              "got strides ", residual.strides());
  TORCH_CHECK(!residual.is_cuda() || x.size(-1) <= kMaxScalarCols ||
                  reinterpret_cast<std::uintptr_t>(residual.data_ptr()) % 16 == 0,
              "add_rms_norm_quant: residual must start at a 16-byte address when D exceeds ", kMaxScalarCols,
              " on CUDA (it is updated in place, so it cannot be copied)");
}

Pair rms_norm_quant_cpu(const at::Tensor& x, const at::Tensor& weight, double eps) {
  COURSE_REFUSE_UNFINISHED(x, "quantize_rows_cpu");
  check_quant("rms_norm_quant", x, weight, eps);
  return quant_cpu(x, weight, eps);
}

Pair add_rms_norm_quant_cpu(const at::Tensor& x, const at::Tensor& residual, const at::Tensor& weight, double eps) {
  COURSE_REFUSE_UNFINISHED(x, "quantize_rows_cpu", "TORCH_LIBRARY(rmsnorm_int8, m)");
  check_quant("add_rms_norm_quant", x, weight, eps);
  check_residual(x, residual);
  // The sum rounded to the dtype, as the residual stream keeps it, is what is normalized.
  residual.copy_((x.to(at::kFloat) + residual.to(at::kFloat)).to(x.scalar_type()));
  return quant_cpu(residual, weight, eps);
}

// ---- the CUDA kernels, on contiguous copies where the inputs are not ----

void check_launch(const char* op, cudaError_t error) {
  TORCH_CHECK(error == cudaSuccess, op, ": kernel launch failed: ", cudaGetErrorString(error));
}

Pair forward_cuda(const at::Tensor& x_any, const std::optional<at::Tensor>& weight, double eps) {
  COURSE_REFUSE_UNFINISHED(x_any, "rms_norm_forward_kernel");
  check_x("rms_norm", x_any, false);
  check_eps("rms_norm", eps);
  const at::Tensor x = aligned_contiguous(x_any);
  const at::Tensor w = weight_or_none("rms_norm", weight, x);
  auto y = at::empty_like(x);
  auto rstd = at::empty(batch_shape(x), x.options().dtype(at::kFloat));
  // On x's GPU and the stream torch uses there, after the work that made x.
  const c10::cuda::CUDAGuard device_guard(x.device());
  const cudaStream_t stream = c10::cuda::getCurrentCUDAStream();
  AT_DISPATCH_FLOATING_TYPES_AND2(at::kHalf, at::kBFloat16, x.scalar_type(), "rms_norm", [&] {
    if constexpr (!std::is_same_v<scalar_t, double>) {  // check_x refused float64 on CUDA
      check_launch("rms_norm", launch_rms_norm_forward(cuda_ptr<scalar_t>(x), cuda_ptr_or_null<scalar_t>(w),
                                                       cuda_ptr<scalar_t>(y), rstd.data_ptr<float>(), rows_of(x),
                                                       x.size(-1), static_cast<float>(eps), stream));
    }
  });
  return {y, rstd};
}

Pair backward_cuda(const at::Tensor& dy_any, const at::Tensor& x_any, const std::optional<at::Tensor>& weight,
                   const at::Tensor& rstd_any) {
  COURSE_REFUSE_UNFINISHED(x_any, "rms_norm_backward_kernel");
  check_x("rms_norm_backward", x_any, false);
  check_like("rms_norm_backward", "dy", dy_any, x_any, x_any.sizes(), x_any.scalar_type());
  check_like("rms_norm_backward", "rstd", rstd_any, x_any, batch_shape(x_any), at::kFloat);
  const at::Tensor dy = aligned_contiguous(dy_any), x = aligned_contiguous(x_any), rstd = rstd_any.contiguous();
  const at::Tensor w = weight_or_none("rms_norm_backward", weight, x);
  const int64_t rows = rows_of(x), cols = x.size(-1);
  auto dx = at::empty_like(x);
  if (rows == 0) return {dx, at::zeros({cols}, x.options())};  // a sum of nothing
  const c10::cuda::CUDAGuard device_guard(x.device());
  const cudaStream_t stream = c10::cuda::getCurrentCUDAStream();
  at::Tensor dweight;
  AT_DISPATCH_FLOATING_TYPES_AND2(at::kHalf, at::kBFloat16, x.scalar_type(), "rms_norm_backward", [&] {
    if constexpr (!std::is_same_v<scalar_t, double>) {
      const int64_t partial_rows = rms_norm_backward_partial_rows(cuda_ptr<scalar_t>(dy), cuda_ptr<scalar_t>(x),
                                                                  cuda_ptr_or_null<scalar_t>(w), cuda_ptr<scalar_t>(dx),
                                                                  rows, cols);
      auto partials = at::empty({partial_rows, cols}, x.options().dtype(at::kFloat));
      dweight = at::empty({cols}, x.options());
      check_launch("rms_norm_backward",
                   launch_rms_norm_backward(cuda_ptr<scalar_t>(dy), cuda_ptr<scalar_t>(x),
                                            cuda_ptr_or_null<scalar_t>(w), rstd.data_ptr<float>(),
                                            cuda_ptr<scalar_t>(dx), partials.data_ptr<float>(),
                                            cuda_ptr<scalar_t>(dweight), rows, cols, stream));
    }
  });
  return {dx, dweight};
}

Pair quant_cuda(const char* op, const at::Tensor& x_any, const at::Tensor& residual, const at::Tensor& weight,
                double eps) {
  const at::Tensor x = aligned_contiguous(x_any), w = aligned_contiguous(weight);
  auto q = at::empty(x.sizes(), x.options().dtype(at::kChar));
  auto scale = at::empty(batch_shape(x), x.options().dtype(at::kFloat));
  const c10::cuda::CUDAGuard device_guard(x.device());
  const cudaStream_t stream = c10::cuda::getCurrentCUDAStream();
  AT_DISPATCH_FLOATING_TYPES_AND2(at::kHalf, at::kBFloat16, x.scalar_type(), "rms_norm_quant", [&] {
    if constexpr (!std::is_same_v<scalar_t, double>) {
      check_launch(op, launch_rms_norm_quant(cuda_ptr<scalar_t>(x), cuda_ptr_or_null<scalar_t>(residual),
                                             cuda_ptr<scalar_t>(w), q.data_ptr<int8_t>(), scale.data_ptr<float>(),
                                             rows_of(x), x.size(-1), static_cast<float>(eps), stream));
    }
  });
  return {q, scale};
}

Pair rms_norm_quant_cuda(const at::Tensor& x, const at::Tensor& weight, double eps) {
  COURSE_REFUSE_UNFINISHED(x, "rms_norm_quant_kernel", "quantize_int8");
  check_quant("rms_norm_quant", x, weight, eps);
  return quant_cuda("rms_norm_quant", x, at::Tensor(), weight, eps);
}

Pair add_rms_norm_quant_cuda(const at::Tensor& x, const at::Tensor& residual, const at::Tensor& weight, double eps) {
  COURSE_REFUSE_UNFINISHED(x, "rms_norm_quant_kernel", "quantize_int8", "TORCH_LIBRARY(rmsnorm_int8, m)");
  check_quant("add_rms_norm_quant", x, weight, eps);
  check_residual(x, residual);
  return quant_cuda("add_rms_norm_quant", x, residual, weight, eps);
}

// ---- autograd for rms_norm, in C++ as on day 7: no Python runs per call ----

Pair call_forward(const at::Tensor& x, const std::optional<at::Tensor>& weight, double eps) {
  static const auto op = c10::Dispatcher::singleton()
                             .findSchemaOrThrow("rmsnorm_int8::rms_norm", "")
                             .typed<Pair(const at::Tensor&, const std::optional<at::Tensor>&, double)>();
  return op.call(x, weight, eps);
}

Pair call_backward(const at::Tensor& dy, const at::Tensor& x, const std::optional<at::Tensor>& weight,
                   const at::Tensor& rstd) {
  static const auto op =
      c10::Dispatcher::singleton()
          .findSchemaOrThrow("rmsnorm_int8::rms_norm_backward", "")
          .typed<Pair(const at::Tensor&, const at::Tensor&, const std::optional<at::Tensor>&, const at::Tensor&)>();
  return op.call(dy, x, weight, rstd);
}

// rms_norm's backward node (autograd_node.h says why by hand): x, weight and rstd kept as
// SavedVariables, freed once backward ran.
struct RmsNormBackward : public torch::autograd::Node {
  torch::autograd::SavedVariable x, weight, rstd;
  bool has_weight = false;

  std::string name() const override { return "RmsNormBackward"; }

  void release_variables() override {
    x.reset_data();
    weight.reset_data();
    rstd.reset_data();
  }

  torch::autograd::variable_list apply(torch::autograd::variable_list&& grads) override {
    const at::Tensor x_ = x.unpack();
    const at::Tensor dy = grads[0].defined() ? grads[0] : at::zeros_like(x_);
    at::AutoDispatchBelowADInplaceOrView below_autograd;
    auto [dx, dweight] =
        call_backward(dy, x_, has_weight ? std::optional<at::Tensor>(weight.unpack()) : std::nullopt, rstd.unpack());
    return {dx, has_weight ? dweight : at::Tensor()};
  }
};

Pair forward_autograd(const at::Tensor& x, const std::optional<at::Tensor>& weight, double eps) {
  const at::Tensor w = weight.value_or(at::Tensor());
  TORCH_CHECK(!torch::autograd::isFwGradDefined(x) && !torch::autograd::isFwGradDefined(w),
              "rms_norm: forward-mode AD (dual tensors, torch.func.jvp) is not implemented for this operator");
  Pair outputs;
  {
    at::AutoDispatchBelowADInplaceOrView below_autograd;
    outputs = call_forward(x, weight, eps);
  }
  if (torch::autograd::compute_requires_grad(x, w)) {
    auto node = course::make_node<RmsNormBackward>();
    node->set_next_edges(torch::autograd::collect_next_edges(x, w));
    node->x = torch::autograd::SavedVariable(x, false);
    node->weight = torch::autograd::SavedVariable(w, false);
    node->rstd = torch::autograd::SavedVariable(std::get<1>(outputs), false);  // no history: not differentiable
    node->has_weight = w.defined();
    torch::autograd::set_history(std::get<0>(outputs), node);
  }
  return outputs;
}

}  // namespace

// BEGIN SOLUTION
TORCH_LIBRARY(rmsnorm_int8, m) {
  m.def("rms_norm(Tensor x, Tensor? weight, float eps) -> (Tensor, Tensor)");
  m.def("rms_norm_backward(Tensor dy, Tensor x, Tensor? weight, Tensor rstd) -> (Tensor, Tensor)");
  m.def("rms_norm_quant(Tensor x, Tensor weight, float eps) -> (Tensor, Tensor)");
  m.def("add_rms_norm_quant(Tensor x, Tensor(a!) residual, Tensor weight, float eps) -> (Tensor, Tensor)");
}
// STUB
COURSE_TODO("day09: rmsnorm_ops.cpp, TORCH_LIBRARY(rmsnorm_int8, m): add_rms_norm_quant's schema must say that it writes residual (Tensor(a!)), then delete this line");

TORCH_LIBRARY(rmsnorm_int8, m) {
  m.def("rms_norm(Tensor x, Tensor? weight, float eps) -> (Tensor, Tensor)");
  m.def("rms_norm_backward(Tensor dy, Tensor x, Tensor? weight, Tensor rstd) -> (Tensor, Tensor)");
  m.def("rms_norm_quant(Tensor x, Tensor weight, float eps) -> (Tensor, Tensor)");
  // TODO(day09): this op adds x into residual in place: say so in the schema
  m.def("add_rms_norm_quant(Tensor x, Tensor residual, Tensor weight, float eps) -> (Tensor, Tensor)");
}
// END SOLUTION

TORCH_LIBRARY_IMPL(rmsnorm_int8, Autograd, m) {
  m.impl("rms_norm", &forward_autograd);
}

TORCH_LIBRARY_IMPL(rmsnorm_int8, CPU, m) {
  m.impl("rms_norm", &forward_cpu);
  m.impl("rms_norm_backward", &backward_cpu);
  m.impl("rms_norm_quant", &rms_norm_quant_cpu);
  m.impl("add_rms_norm_quant", &add_rms_norm_quant_cpu);
}

TORCH_LIBRARY_IMPL(rmsnorm_int8, CUDA, m) {
  m.impl("rms_norm", &forward_cuda);
  m.impl("rms_norm_backward", &backward_cuda);
  m.impl("rms_norm_quant", &rms_norm_quant_cuda);
  m.impl("add_rms_norm_quant", &add_rms_norm_quant_cuda);
}

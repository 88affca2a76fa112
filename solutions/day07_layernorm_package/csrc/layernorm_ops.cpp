// LayerNorm as PyTorch operators: fast_layernorm::forward and fast_layernorm::backward, and
// fast_layernorm::layer_norm, what users call, made of forward (at the end of this file).
//
//   forward(x [..., D], weight [D]?, bias [D]?, eps) -> (y [..., D], mean [...], rstd [...])
//       y = (x - mean) * rstd * weight + bias,  rstd = 1 / sqrt(var + eps), over the last dim
//   backward(dy [..., D], x, weight [D]?, mean, rstd) -> (dx, dweight [D], dbias [D])
//       x̂ = (x - mean) * rstd,  g = dy * weight
//       dx = rstd * (g - mean(g) - x̂ * mean(g * x̂)),  dweight = Σ_rows dy * x̂,  dbias = Σ_rows dy
//
// TORCH_LIBRARY declares each operator's schema: its arguments, that it writes none of them
// (no `!` annotation), and what it returns. The dispatcher then routes a call by the inputs'
// keys to the kernels registered with TORCH_LIBRARY_IMPL: first the Autograd one (which
// records how to differentiate forward, then calls on below autograd), then the device's: the
// CPU one here in ATen ops, the CUDA one with day 5's kernels. The fake kernels, which
// torch.compile traces with, are registered from Python (fast_layernorm/ops.py).
//
// mean and rstd are float32 (float64 for float64 x), as torch's own layer norm saves them. A
// missing weight counts as ones and a missing bias as zeros.
#include <ATen/ATen.h>
#include <ATen/OpMathType.h>
#include <c10/cuda/CUDAGuard.h>
#include <c10/cuda/CUDAStream.h>
#include <torch/csrc/autograd/custom_function.h>
#include <torch/library.h>

#include <optional>
#include <tuple>

#include "autograd_node.h"
#include "course_todo.h"
#include "cuda_ptr.h"
#include "layernorm_fast.h"

namespace {

using Tensors = std::tuple<at::Tensor, at::Tensor, at::Tensor>;

constexpr int64_t kMaxCols = int64_t{1} << 30;

// ---- checks both devices share: each message names the op, the argument and what was expected ----

void check_x(const char* op, const at::Tensor& x) {
  TORCH_CHECK(x.dim() >= 1 && x.size(-1) >= 1, op, ": x must have shape [..., D] with D >= 1, got ", x.sizes());
  const auto dtype = x.scalar_type();
  TORCH_CHECK(dtype == at::kHalf || dtype == at::kBFloat16 || dtype == at::kFloat || dtype == at::kDouble, op,
              ": x must be float16, bfloat16, float32 or float64, got ", dtype);
  TORCH_CHECK(x.size(-1) <= kMaxCols, op, ": x's last dimension must be at most 2^30, got ", x.size(-1));
}

// `tensor` must be on x's device, of `dtype` and of shape `shape`.
void check_like(const char* op, const char* name, const at::Tensor& tensor, const at::Tensor& x,
                at::IntArrayRef shape, at::ScalarType dtype) {
  TORCH_CHECK(tensor.device() == x.device(), op, ": ", name, " must be on x's device ", x.device(), ", got ",
              tensor.device());
  TORCH_CHECK(tensor.sizes() == shape, op, ": ", name, " must have shape ", shape, ", got ", tensor.sizes());
  TORCH_CHECK(tensor.scalar_type() == dtype, op, ": ", name, " must have dtype ", dtype, ", got ",
              tensor.scalar_type());
}

// The weight or bias as a contiguous [D] tensor: `fill` where the caller passed none.
at::Tensor param_or(const char* op, const char* name, const std::optional<at::Tensor>& param, const at::Tensor& x,
                    double fill) {
  const int64_t cols = x.size(-1);
  if (!param.has_value() || !param->defined()) return at::full({cols}, fill, x.options());
  check_like(op, name, *param, x, {cols}, x.scalar_type());
  return param->contiguous();
}

at::ScalarType stats_dtype(const at::Tensor& x) { return at::toOpMathType(x.scalar_type()); }

at::IntArrayRef batch_shape(const at::Tensor& x) { return x.sizes().slice(0, x.dim() - 1); }

void check_backward(const at::Tensor& dy, const at::Tensor& x, const at::Tensor& mean, const at::Tensor& rstd) {
  check_x("backward", x);
  check_like("backward", "dy", dy, x, x.sizes(), x.scalar_type());
  check_like("backward", "mean", mean, x, batch_shape(x), stats_dtype(x));
  check_like("backward", "rstd", rstd, x, batch_shape(x), stats_dtype(x));
}

// ---- the CPU kernels: the math in ATen ops, in float32 (float64 for float64 x) ----

// BEGIN SOLUTION
// STUB
COURSE_TODO_CPU("day07: csrc/layernorm_ops.cpp, forward_cpu and backward_cpu: the math at the top of this file in ATen ops on x.to(stats_dtype(x)), then delete this line");
// END SOLUTION

Tensors forward_cpu(const at::Tensor& x, const std::optional<at::Tensor>& weight,
                    const std::optional<at::Tensor>& bias, double eps) {
  check_x("forward", x);
  TORCH_CHECK(eps > 0, "forward: eps must be > 0, got ", eps);
  const at::Tensor w = param_or("forward", "weight", weight, x, 1.0);
  const at::Tensor b = param_or("forward", "bias", bias, x, 0.0);
  COURSE_REFUSE_UNFINISHED(x, "forward_cpu and backward_cpu");  // after the checks, which are given
  // BEGIN SOLUTION
  const at::Tensor xs = x.to(stats_dtype(x));
  const at::Tensor mean = xs.mean(-1);
  const at::Tensor centered = xs - mean.unsqueeze(-1);
  const at::Tensor rstd = (centered.square().mean(-1) + eps).rsqrt();
  const at::Tensor y = centered * rstd.unsqueeze(-1) * w.to(xs.scalar_type()) + b.to(xs.scalar_type());
  return {y.to(x.scalar_type()).contiguous(), mean, rstd};
  // STUB
  // TODO(day07): mean, rstd and y of the math at the top of this file, in ATen ops on x.to(stats_dtype(x))
  return {at::empty_like(x), at::empty(batch_shape(x), x.options()), at::empty(batch_shape(x), x.options())};
  // END SOLUTION
}

Tensors backward_cpu(const at::Tensor& dy, const at::Tensor& x, const std::optional<at::Tensor>& weight,
                     const at::Tensor& mean, const at::Tensor& rstd) {
  check_backward(dy, x, mean, rstd);
  const at::Tensor w = param_or("backward", "weight", weight, x, 1.0);
  COURSE_REFUSE_UNFINISHED(x, "forward_cpu and backward_cpu");
  // BEGIN SOLUTION
  const auto acc = stats_dtype(x);
  const at::Tensor dys = dy.to(acc);
  const at::Tensor xhat = (x.to(acc) - mean.unsqueeze(-1)) * rstd.unsqueeze(-1);
  const at::Tensor g = dys * w.to(acc);
  const at::Tensor dx = rstd.unsqueeze(-1) * (g - g.mean(-1, true) - xhat * (g * xhat).mean(-1, true));
  const auto rows = dys.reshape({-1, x.size(-1)});
  const at::Tensor dweight = (rows * xhat.reshape({-1, x.size(-1)})).sum(0);
  const at::Tensor dbias = rows.sum(0);
  return {dx.to(x.scalar_type()).contiguous(), dweight.to(x.scalar_type()), dbias.to(x.scalar_type())};
  // STUB
  // TODO(day07): dx, dweight and dbias of the math at the top of this file, in ATen ops in stats_dtype(x)
  return {at::empty_like(x), at::empty({x.size(-1)}, x.options()), at::empty({x.size(-1)}, x.options())};
  // END SOLUTION
}

// ---- the CUDA kernels: day 5's, on contiguous copies where the inputs are not ----

// BEGIN SOLUTION
// STUB
COURSE_TODO_CUDA("day07: csrc/layernorm_ops.cpp, forward_cuda and backward_cuda: allocate the outputs, then launch day 5's kernels on x's device and torch's current stream there (as day05's layernorm.cpp does), then delete this line");
// END SOLUTION

Tensors forward_cuda(const at::Tensor& x_any, const std::optional<at::Tensor>& weight,
                     const std::optional<at::Tensor>& bias, double eps) {
  check_x("forward", x_any);
  TORCH_CHECK(eps > 0, "forward: eps must be > 0, got ", eps);
  const at::Tensor x = x_any.contiguous();
  const at::Tensor w = param_or("forward", "weight", weight, x, 1.0);
  const at::Tensor b = param_or("forward", "bias", bias, x, 0.0);
  COURSE_REFUSE_UNFINISHED(x, "forward_cuda and backward_cuda");
  // BEGIN SOLUTION
  auto y = at::empty_like(x);
  auto mean = at::empty(batch_shape(x), x.options().dtype(stats_dtype(x)));
  auto rstd = at::empty_like(mean);
  // Kernels run on x's GPU and on the stream torch is using there, so they are ordered after
  // the work that made x.
  const c10::cuda::CUDAGuard device_guard(x.device());
  const cudaStream_t stream = c10::cuda::getCurrentCUDAStream();
  AT_DISPATCH_FLOATING_TYPES_AND2(at::kHalf, at::kBFloat16, x.scalar_type(), "fast_layernorm::forward", [&] {
    using stats_t = at::opmath_type<scalar_t>;
    const cudaError_t error = launch_layernorm_forward_registers(
        cuda_ptr<scalar_t>(x), cuda_ptr<scalar_t>(w), cuda_ptr<scalar_t>(b), cuda_ptr<scalar_t>(y),
        mean.data_ptr<stats_t>(), rstd.data_ptr<stats_t>(), x.numel() / x.size(-1), x.size(-1), eps, stream);
    TORCH_CHECK(error == cudaSuccess, "forward: kernel launch failed: ", cudaGetErrorString(error));
  });
  return {y, mean, rstd};
  // STUB
  // TODO(day07): allocate y, mean and rstd (stats_dtype(x)), then launch launch_layernorm_forward_registers on
  // x's device (c10::cuda::CUDAGuard) and torch's current stream there, as day05's layernorm.cpp does
  return {at::empty_like(x), at::empty(batch_shape(x), x.options()), at::empty(batch_shape(x), x.options())};
  // END SOLUTION
}

Tensors backward_cuda(const at::Tensor& dy_any, const at::Tensor& x_any, const std::optional<at::Tensor>& weight,
                      const at::Tensor& mean_any, const at::Tensor& rstd_any) {
  check_backward(dy_any, x_any, mean_any, rstd_any);
  const at::Tensor dy = dy_any.contiguous(), x = x_any.contiguous();
  const at::Tensor mean = mean_any.contiguous(), rstd = rstd_any.contiguous();
  const at::Tensor w = param_or("backward", "weight", weight, x, 1.0);
  const int64_t rows = x.numel() / x.size(-1), cols = x.size(-1);
  COURSE_REFUSE_UNFINISHED(x, "forward_cuda and backward_cuda");
  // BEGIN SOLUTION
  auto dx = at::empty_like(x);
  if (rows == 0) return {dx, at::zeros({cols}, x.options()), at::zeros({cols}, x.options())};  // sums of nothing
  auto dweight = at::empty({cols}, x.options());
  auto dbias = at::empty({cols}, x.options());
  const c10::cuda::CUDAGuard device_guard(x.device());
  const cudaStream_t stream = c10::cuda::getCurrentCUDAStream();
  AT_DISPATCH_FLOATING_TYPES_AND2(at::kHalf, at::kBFloat16, x.scalar_type(), "fast_layernorm::backward", [&] {
    using T = typename CudaType<scalar_t>::type;
    using stats_t = at::opmath_type<scalar_t>;
    const bool aligned = is_aligned(dy.data_ptr()) && is_aligned(x.data_ptr()) && is_aligned(w.data_ptr()) &&
                         is_aligned(dx.data_ptr());
    // The fused kernel where it takes the shape, else day 4's two passes.
    const int64_t blocks = layernorm_backward_fused_blocks<T>(rows, cols, aligned);
    const int64_t partial_rows = blocks > 0 ? blocks : num_param_strips(rows);
    const int64_t partial_cols = blocks > 0 ? cols : padded_param_columns(cols);  // day 4's: whole tiles
    auto partials = at::empty({2, partial_rows, partial_cols}, mean.options());
    cudaError_t error = cudaSuccess;
    if (blocks > 0) {
      error = launch_layernorm_backward_fused(cuda_ptr<scalar_t>(dy), cuda_ptr<scalar_t>(x), cuda_ptr<scalar_t>(w),
                                              mean.const_data_ptr<stats_t>(), rstd.const_data_ptr<stats_t>(),
                                              cuda_ptr<scalar_t>(dx), partials.data_ptr<stats_t>(),
                                              cuda_ptr<scalar_t>(dweight), cuda_ptr<scalar_t>(dbias), rows, cols, stream);
    } else {
      error = launch_layernorm_backward_dx(cuda_ptr<scalar_t>(dy), cuda_ptr<scalar_t>(x), cuda_ptr<scalar_t>(w),
                                           mean.const_data_ptr<stats_t>(), rstd.const_data_ptr<stats_t>(),
                                           cuda_ptr<scalar_t>(dx), rows, cols, stream);
      if (error == cudaSuccess) {
        error = launch_layernorm_backward_params(cuda_ptr<scalar_t>(dy), cuda_ptr<scalar_t>(x),
                                                 mean.const_data_ptr<stats_t>(), rstd.const_data_ptr<stats_t>(),
                                                 partials.data_ptr<stats_t>(), cuda_ptr<scalar_t>(dweight),
                                                 cuda_ptr<scalar_t>(dbias), rows, cols, stream);
      }
    }
    TORCH_CHECK(error == cudaSuccess, "backward: kernel launch failed: ", cudaGetErrorString(error));
  });
  return {dx, dweight, dbias};
  // STUB
  // TODO(day07): dx, dweight and dbias by day 5's fused backward where layernorm_backward_fused_blocks takes
  // the shape, else day 4's launch_layernorm_backward_dx and _params; no rows: dweight and dbias are zeros
  return {at::empty_like(x), at::empty({cols}, x.options()), at::empty({cols}, x.options())};
  // END SOLUTION
}

// ---- autograd: forward's derivative, in C++ so that no Python runs per call ----

// The operators as the dispatcher has them: a call goes through the keys still to run.
Tensors call_forward(const at::Tensor& x, const std::optional<at::Tensor>& weight,
                     const std::optional<at::Tensor>& bias, double eps) {
  static const auto op = c10::Dispatcher::singleton()
                             .findSchemaOrThrow("fast_layernorm::forward", "")
                             .typed<Tensors(const at::Tensor&, const std::optional<at::Tensor>&,
                                            const std::optional<at::Tensor>&, double)>();
  return op.call(x, weight, bias, eps);
}

Tensors call_backward(const at::Tensor& dy, const at::Tensor& x, const std::optional<at::Tensor>& weight,
                      const at::Tensor& mean, const at::Tensor& rstd) {
  static const auto op = c10::Dispatcher::singleton()
                             .findSchemaOrThrow("fast_layernorm::backward", "")
                             .typed<Tensors(const at::Tensor&, const at::Tensor&, const std::optional<at::Tensor>&,
                                            const at::Tensor&, const at::Tensor&)>();
  return op.call(dy, x, weight, mean, rstd);
}

// BEGIN SOLUTION
// The backward node of forward (autograd_node.h says why by hand). It keeps backward's
// inputs as SavedVariables: they are freed once backward ran, pass through
// saved-tensor hooks, and refuse to unpack after an in-place change to x or weight.
struct LayerNormBackward : public torch::autograd::Node {
  torch::autograd::SavedVariable x, weight, mean, rstd;
  bool has_weight = false, has_bias = false;

  std::string name() const override { return "LayerNormBackward"; }

  void release_variables() override {
    x.reset_data();
    weight.reset_data();
    mean.reset_data();
    rstd.reset_data();
  }

  torch::autograd::variable_list apply(torch::autograd::variable_list&& grads) override {
    const at::Tensor x_ = x.unpack();
    const at::Tensor dy = grads[0].defined() ? grads[0] : at::zeros_like(x_);
    at::AutoDispatchBelowADInplaceOrView below_autograd;  // backward has no derivative to record
    auto [dx, dweight, dbias] = call_backward(
        dy, x_, has_weight ? std::optional<at::Tensor>(weight.unpack()) : std::nullopt, mean.unpack(), rstd.unpack());
    return {dx, has_weight ? dweight : at::Tensor(), has_bias ? dbias : at::Tensor()};
  }
};

// STUB
COURSE_TODO("day07: csrc/layernorm_ops.cpp, forward_autograd: a torch::autograd::Function whose forward calls the forward operator below autograd and saves x, weight, mean and rstd, and whose backward calls the backward operator, then delete this line");
// END SOLUTION

// forward's Autograd kernel: the device's forward, and where a gradient is asked for, the
// backward node that leads to the backward operator.
Tensors forward_autograd(const at::Tensor& x, const std::optional<at::Tensor>& weight,
                         const std::optional<at::Tensor>& bias, double eps) {
  const at::Tensor w = weight.value_or(at::Tensor()), b = bias.value_or(at::Tensor());
  if (torch::autograd::compute_requires_grad(x, w, b)) {  // without a gradient, only forward runs
    COURSE_REFUSE_UNFINISHED(x, "forward_autograd");
  }
  // BEGIN SOLUTION
  TORCH_CHECK(!torch::autograd::isFwGradDefined(x) && !torch::autograd::isFwGradDefined(w) &&
                  !torch::autograd::isFwGradDefined(b),
              "forward: forward-mode AD (dual tensors, torch.func.jvp) is not implemented for this operator");
  Tensors outputs;
  {
    at::AutoDispatchBelowADInplaceOrView below_autograd;  // the next kernel is the device's
    outputs = call_forward(x, weight, bias, eps);
  }
  if (torch::autograd::compute_requires_grad(x, w, b)) {
    auto node = course::make_node<LayerNormBackward>();
    node->set_next_edges(torch::autograd::collect_next_edges(x, w, b));
    node->x = torch::autograd::SavedVariable(x, false);
    node->weight = torch::autograd::SavedVariable(w, false);
    node->mean = torch::autograd::SavedVariable(std::get<1>(outputs), false);  // no history: not differentiable
    node->rstd = torch::autograd::SavedVariable(std::get<2>(outputs), false);
    node->has_weight = w.defined();
    node->has_bias = b.defined();
    torch::autograd::set_history(std::get<0>(outputs), node);  // y's gradient flows into node
  }
  return outputs;
  // STUB
  at::AutoDispatchBelowADInplaceOrView below_autograd;  // TODO(day07): no gradients recorded yet
  return call_forward(x, weight, bias, eps);
  // END SOLUTION
}

// ---- layer_norm, what users call: to forward what aten::layer_norm is to aten::native_layer_norm ----

// Made of the forward operator and views alone (CompositeImplicitAutograd), so autograd, fake
// tensors and torch.compile see through it and need nothing registered for it. Users get y
// straight from C++: no Python function around the call, no Python objects for mean and rstd.
at::Tensor layer_norm(const at::Tensor& x, c10::SymIntArrayRef normalized_shape,
                      const std::optional<at::Tensor>& weight, const std::optional<at::Tensor>& bias, double eps) {
  const int64_t dims = static_cast<int64_t>(normalized_shape.size());
  TORCH_CHECK(dims >= 1 && x.dim() >= dims && x.sym_sizes().slice(x.dim() - dims) == normalized_shape,
              "layer_norm: normalized_shape must be non-empty and end x's shape ", x.sym_sizes(), ", got ",
              normalized_shape);
  if (dims == 1) return std::get<0>(call_forward(x, weight, bias, eps));  // rows are x's last dim already
  // The trailing dims flattened into one row of D elements, and back.
  c10::SymInt cols = 1;
  for (const c10::SymInt& size : normalized_shape) cols *= size;
  c10::SymDimVector rows_shape(x.sym_sizes().begin(), x.sym_sizes().end() - dims);
  rows_shape.push_back(cols);
  const auto flat = [&](const std::optional<at::Tensor>& param) -> std::optional<at::Tensor> {
    if (!param.has_value() || !param->defined()) return std::nullopt;
    return param->reshape_symint({cols});
  };
  const at::Tensor y = std::get<0>(call_forward(x.reshape_symint(rows_shape), flat(weight), flat(bias), eps));
  return y.reshape_symint(x.sym_sizes());
}

}  // namespace

// The schemas. `float` is a C++ double; `Tensor?` may be None (an std::optional here).
TORCH_LIBRARY(fast_layernorm, m) {
  m.def("forward(Tensor x, Tensor? weight, Tensor? bias, float eps) -> (Tensor, Tensor, Tensor)");
  m.def("backward(Tensor dy, Tensor x, Tensor? weight, Tensor mean, Tensor rstd) -> (Tensor, Tensor, Tensor)");
  // SymInt, not int: compiled shapes may vary.
  m.def("layer_norm(Tensor x, SymInt[] normalized_shape, Tensor? weight=None, Tensor? bias=None, "
        "float eps=1e-05) -> Tensor");
}

// Composite: the same kernel for every device, and autograd's comes from the ops it calls.
TORCH_LIBRARY_IMPL(fast_layernorm, CompositeImplicitAutograd, m) {
  m.impl("layer_norm", &layer_norm);
}

// Autograd covers every device; backward needs none: nothing differentiates it.
TORCH_LIBRARY_IMPL(fast_layernorm, Autograd, m) {
  m.impl("forward", &forward_autograd);
}

TORCH_LIBRARY_IMPL(fast_layernorm, CPU, m) {
  m.impl("forward", &forward_cpu);
  m.impl("backward", &backward_cpu);
}

TORCH_LIBRARY_IMPL(fast_layernorm, CUDA, m) {
  m.impl("forward", &forward_cuda);
  m.impl("backward", &backward_cuda);
}

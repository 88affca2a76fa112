// Launcher for the ReLU-with-bias kernel, shared by relu_bias.cu and relu_bias.cpp.
//
// No torch header here: at::TensorBase is only named, never used, so declaring it
// is enough. ATen's own CUDA launchers take `const TensorBase&` for the same reason.
#pragma once

#include <cuda_runtime.h>

namespace at {
class TensorBase;  // at::Tensor derives from it: the .cpp passes its tensors as they are
}  // namespace at

// y[row][col] = max(0, x[row][col] + bias[col]) for x, y: [M, N] and bias: [N], of any
// strides. scalar_t is float, double, c10::Half or c10::BFloat16, the tensors' dtype.
// Launches on `stream` and returns the launch error (cudaSuccess when none).
template <typename scalar_t>
cudaError_t launch_relu_bias(const at::TensorBase& x, const at::TensorBase& bias,
                             const at::TensorBase& y, cudaStream_t stream);

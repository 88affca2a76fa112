// Launcher for the ReLU-with-bias kernel, shared by relu_bias.cu and relu_bias.cpp.
//
// The .cpp turns each tensor into an accessor and the .cu never sees a tensor: ATen's
// accessor header is a fraction of a tensor's, and nvcc parses the .cu's headers again on
// every rebuild of it.
#pragma once

#include <ATen/core/TensorAccessor.h>
#include <cuda_runtime.h>

// A tensor as a kernel reads it: data pointer, sizes and strides, with 32-bit index math.
// (ATen's kernels often add at::RestrictPtrTraits, a promise that no two accessors overlap;
// it exists only where nvcc compiles, and the .cpp makes these.)
template <typename scalar_t, int dims>
using Accessor32 = at::PackedTensorAccessor32<scalar_t, dims>;

// y[row][col] = max(0, x[row][col] + bias[col]) for x, y: [M, N] and bias: [N], of any
// strides. scalar_t is float, double, c10::Half or c10::BFloat16, the tensors' dtype.
// Launches on `stream` and returns the launch error (cudaSuccess when none).
template <typename scalar_t>
cudaError_t launch_relu_bias(Accessor32<scalar_t, 2> x, Accessor32<scalar_t, 1> bias, Accessor32<scalar_t, 2> y,
                             cudaStream_t stream);

// ReLU with a bias on the GPU: y[row][col] = max(0, x[row][col] + bias[col]).
//
// One thread per element. Blocks of 32 x 8 threads tile the [M, N] matrix:
// threadIdx.x runs along a row, so the 32 threads of a warp touch 32 neighbouring
// elements of a row-major x, which the GPU serves as one memory transaction.
// Rows beyond what one grid covers (gridDim.y is at most 65535) are taken by a
// grid-stride loop.
//
// Unlike the later units' .cu files, this one includes a PyTorch header: the
// kernel reads its tensors through PackedTensorAccessor32, a PyTorch type. It is
// the smallest header that has it; <torch/extension.h> would make every rebuild
// of this file several times slower. (torch::PackedTensorAccessor32, as tutorials
// spell it, is this same at:: type: the torch namespace re-exports at.)
#include <ATen/OpMathType.h>
#include <ATen/core/TensorBase.h>

#include <algorithm>

#include "course_todo.h"
#include "relu_bias.h"

namespace {

constexpr int kBlockCols = 32;           // one warp along a row: coalesced loads and stores
constexpr int kBlockRows = 8;            // 256 threads a block
constexpr int64_t kMaxGridRows = 65535;  // the hardware's limit on gridDim.y

COURSE_TODO("day01: relu_bias.cu, relu_bias_kernel: find this thread's column and first row, skip columns past N, loop over rows writing max(0, x + bias), then delete this line");
// An accessor is a pointer with sizes and strides: x[row][col] reads the element at
// row * x.stride(0) + col * x.stride(1), whatever the layout. It checks no bounds.
template <typename scalar_t>
__global__ void relu_bias_kernel(const at::PackedTensorAccessor32<scalar_t, 2, at::RestrictPtrTraits> x,
                                 const at::PackedTensorAccessor32<scalar_t, 1, at::RestrictPtrTraits> bias,
                                 at::PackedTensorAccessor32<scalar_t, 2, at::RestrictPtrTraits> y) {
  // Half and BFloat16 are added in float (opmath_t), as ATen's kernels do, then rounded once.
  using opmath_t = at::opmath_type<scalar_t>;
  // TODO(day01): col = blockIdx.x * blockDim.x + threadIdx.x; return if col >= x.size(1).
  // Then for row = blockIdx.y * blockDim.y + threadIdx.y while row < x.size(0), stepping by
  // gridDim.y * blockDim.y: y[row][col] = max(0, x[row][col] + bias[col]), added in opmath_t.
}

}  // namespace

template <typename scalar_t>
cudaError_t launch_relu_bias(const at::TensorBase& x, const at::TensorBase& bias,
                             const at::TensorBase& y, cudaStream_t stream) {
  const int64_t rows = x.size(0);
  const int64_t cols = x.size(1);
  if (rows == 0 || cols == 0) return cudaSuccess;  // nothing to do, and a grid of 0 blocks is an error
  const dim3 block(kBlockCols, kBlockRows);
  const dim3 grid(static_cast<unsigned>((cols + kBlockCols - 1) / kBlockCols),
                  static_cast<unsigned>(std::min((rows + kBlockRows - 1) / kBlockRows, kMaxGridRows)));
  // packed_accessor32 refuses (throws) tensors too large for 32-bit index math.
  relu_bias_kernel<scalar_t><<<grid, block, 0, stream>>>(
      x.packed_accessor32<scalar_t, 2, at::RestrictPtrTraits>(),
      bias.packed_accessor32<scalar_t, 1, at::RestrictPtrTraits>(),
      y.packed_accessor32<scalar_t, 2, at::RestrictPtrTraits>());
  return cudaGetLastError();
}

// The .cpp dispatches on dtype and calls one of these; they must exist for each.
template cudaError_t launch_relu_bias<float>(const at::TensorBase&, const at::TensorBase&,
                                             const at::TensorBase&, cudaStream_t);
template cudaError_t launch_relu_bias<double>(const at::TensorBase&, const at::TensorBase&,
                                              const at::TensorBase&, cudaStream_t);
template cudaError_t launch_relu_bias<c10::Half>(const at::TensorBase&, const at::TensorBase&,
                                                 const at::TensorBase&, cudaStream_t);
template cudaError_t launch_relu_bias<c10::BFloat16>(const at::TensorBase&, const at::TensorBase&,
                                                     const at::TensorBase&, cudaStream_t);

// ReLU with a bias on the GPU: y[row][col] = max(0, x[row][col] + bias[col]).
//
// One thread per element. Blocks of 32 x 8 threads tile the [M, N] matrix:
// threadIdx.x runs along a row, so the 32 threads of a warp touch 32 neighbouring
// elements of a row-major x, which the GPU serves as one memory transaction.
// Rows beyond what one grid covers (gridDim.y is at most 65535) are taken by a
// grid-stride loop.
//
// The kernel reads its tensors through PackedTensorAccessor32, a PyTorch type, but
// includes no tensor header: the .cpp makes the accessors (relu_bias.h says why).
#include <c10/util/BFloat16.h>
#include <c10/util/Half.h>

#include <algorithm>
#include <type_traits>

#include "course_todo.h"
#include "relu_bias.h"

namespace {

constexpr int kBlockCols = 32;           // one warp along a row: coalesced loads and stores
constexpr int kBlockRows = 8;            // 256 threads a block
constexpr int64_t kMaxGridRows = 65535;  // the hardware's limit on gridDim.y

// Half and BFloat16 are added in float, as ATen's kernels do (at::opmath_type), then rounded
// once; float and double in their own type.
template <typename scalar_t>
using opmath_type = std::conditional_t<std::is_same_v<scalar_t, double>, double, float>;

COURSE_TODO("day01: relu_bias.cu, relu_bias_kernel: find this thread's column and first row, skip columns past N, loop over rows writing max(0, x + bias), then delete this line");
// An accessor is a pointer with sizes and strides: x[row][col] reads the element at
// row * x.stride(0) + col * x.stride(1), whatever the layout. It checks no bounds.
template <typename scalar_t>
__global__ void relu_bias_kernel(const Accessor32<scalar_t, 2> x, const Accessor32<scalar_t, 1> bias,
                                 Accessor32<scalar_t, 2> y) {
  using opmath_t = opmath_type<scalar_t>;
  // TODO(day01): col = blockIdx.x * blockDim.x + threadIdx.x; return if col >= x.size(1).
  // Then for row = blockIdx.y * blockDim.y + threadIdx.y while row < x.size(0), stepping by
  // gridDim.y * blockDim.y: y[row][col] = max(0, x[row][col] + bias[col]), added in opmath_t.
}

}  // namespace

template <typename scalar_t>
cudaError_t launch_relu_bias(Accessor32<scalar_t, 2> x, Accessor32<scalar_t, 1> bias, Accessor32<scalar_t, 2> y,
                             cudaStream_t stream) {
  const int64_t rows = x.size(0);
  const int64_t cols = x.size(1);
  if (rows == 0 || cols == 0) return cudaSuccess;  // nothing to do, and a grid of 0 blocks is an error
  const dim3 block(kBlockCols, kBlockRows);
  const dim3 grid(static_cast<unsigned>((cols + kBlockCols - 1) / kBlockCols),
                  static_cast<unsigned>(std::min((rows + kBlockRows - 1) / kBlockRows, kMaxGridRows)));
  relu_bias_kernel<scalar_t><<<grid, block, 0, stream>>>(x, bias, y);
  return cudaGetLastError();
}

// The .cpp dispatches on dtype and calls one of these; they must exist for each.
#define INSTANTIATE_LAUNCH_RELU_BIAS(scalar_t)                                                         \
  template cudaError_t launch_relu_bias<scalar_t>(Accessor32<scalar_t, 2>, Accessor32<scalar_t, 1>, \
                                                  Accessor32<scalar_t, 2>, cudaStream_t);
INSTANTIATE_LAUNCH_RELU_BIAS(float)
INSTANTIATE_LAUNCH_RELU_BIAS(double)
INSTANTIATE_LAUNCH_RELU_BIAS(c10::Half)
INSTANTIATE_LAUNCH_RELU_BIAS(c10::BFloat16)

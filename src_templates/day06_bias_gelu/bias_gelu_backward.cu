// Fused bias + GELU, backward: dx = dy · gelu'(x + bias) and dbias = Σ_rows dx, reading dy and
// x once.
//
// Eager PyTorch's backward of F.gelu(x + bias) reads dy and the saved x + bias and writes dx
// (gelu_backward), then reads dx once more to sum it over the rows for dbias (sum). Here the
// sums are taken on the way, in two stages:
//
//   stage 1, bias_gelu_backward_kernel: block (c, s) owns column block c (blockDim.x vectors of
//     a row) and strip s of rows. Each thread walks its rows of the strip, writes dx, and keeps
//     a running sum of dx per column in registers, in the op-math type (fp32 for 16-bit x: a
//     16-bit running sum drops the last bits of every term once it is a few hundred times
//     larger). Then the block's rows of threads meet in shared memory, and the block writes one
//     row of partial sums: partials[s][the columns of c].
//   stage 2, sum_strips_kernel: one thread per column adds partials[0][col], partials[1][col],
//     ... in that order and rounds the total once.
//
// Nothing is summed with atomics: every sum runs in an order the grid fixes, and the grid
// depends only on the shape, the pointers' alignment and the GPU, so two calls give the same
// bits. (atomicAdd would add the strips in whatever order their blocks happen to finish.)
#include <algorithm>

#include "course_todo.h"
#include "vectors.cuh"

namespace {

constexpr int kBlockThreads = 512;
constexpr int kMinRowsPerThread = 4;  // fewer, and the block's meeting costs more than its rows
constexpr int kSumThreads = 256;      // stage 2

COURSE_TODO("day06: bias_gelu_backward.cu, bias_gelu_backward_kernel: write dx for this thread's rows of the strip while summing it per column, then the block's row of partials, then delete this line");
// dy, x, dx: [rows, vecs] vectors of kVec elements; bias: [vecs] vectors; partials: [strips,
// vecs * kVec], row blockIdx.y written here. Strip s is rows s * rows_per_strip up to rows.
template <typename T, int kVec, GeluForm kForm>
__global__ void __launch_bounds__(kBlockThreads)
bias_gelu_backward_kernel(const T* __restrict__ dy, const T* __restrict__ x, const T* __restrict__ bias,
                          T* __restrict__ dx, acc_type_t<T>* __restrict__ partials, int64_t rows, int vecs,
                          int64_t rows_per_strip) {
  using acc_t = acc_type_t<T>;
  using Vec = AlignedVector<T, kVec>;
  __shared__ acc_t block_sums[kBlockThreads * kVec];  // [blockDim.y][blockDim.x * kVec]
  const int v = blockIdx.x * blockDim.x + threadIdx.x;  // this thread's vector column
  const int64_t first_row = static_cast<int64_t>(blockIdx.y) * rows_per_strip;
  const int64_t end_row = first_row + rows_per_strip < rows ? first_row + rows_per_strip : rows;
  const int width = blockDim.x * kVec;  // the block's columns
  const int64_t cols = static_cast<int64_t>(vecs) * kVec;
  const Vec* dy_vecs = reinterpret_cast<const Vec*>(dy);
  const Vec* x_vecs = reinterpret_cast<const Vec*>(x);
  const Vec* bias_vecs = reinterpret_cast<const Vec*>(bias);
  Vec* dx_vecs = reinterpret_cast<Vec*>(dx);
  acc_t sums[kVec] = {};  // this thread's running sums of dx, one per column of its vector
  // TODO(day06): two parts.
  //   1. If v < vecs (but no return: every thread must reach the __syncthreads of part 2):
  //      widen this thread's bias vector once into acc_t b[kVec], as in the forward. Then for
  //      row = first_row + threadIdx.y while row < end_row, stepping by blockDim.y: read the Vecs
  //      dy_vecs[row * vecs + v] and x_vecs[row * vecs + v]; for each element e,
  //      d = to_acc(dy) * gelu_grad<kForm>(to_acc(x) + b[e]) in acc_t; store from_acc<T>(d) in
  //      a Vec out and add d (unrounded) to sums[e]; write out to dx_vecs[row * vecs + v].
  //   2. The block's meeting: thread (tx, ty) writes sums[e] to block_sums[ty * width + tx * kVec + e];
  //      __syncthreads(); then thread number t = ty * blockDim.x + tx, for t < width, adds
  //      block_sums[y * width + t] over y = 0, 1, ..., blockDim.y - 1 in that order and writes the
  //      total to partials[blockIdx.y * cols + col], col = blockIdx.x * width + t, where col < cols.
  //      No atomicAdd: the order of every sum must not depend on timing.
}

COURSE_TODO("day06: bias_gelu_backward.cu, sum_strips_kernel: one thread per column adds the strips' partial sums in order, then delete this line");
// partials: [strips, cols]; dbias[col] = the sum of column col over the strips.
template <typename T>
__global__ void __launch_bounds__(kSumThreads)
sum_strips_kernel(const acc_type_t<T>* __restrict__ partials, T* __restrict__ dbias, int strips, int cols) {
  const int col = blockIdx.x * blockDim.x + threadIdx.x;
  // TODO(day06): return if col >= cols; add partials[s * cols + col] for s = 0, 1, ..., strips - 1
  // in that order into an acc_type_t<T> total (index in int64_t: strips * cols may pass 2^31), and
  // write dbias[col] = from_acc<T>(total): rounded once, at the end.
}

template <typename T, int kVec>
using BackwardKernel = decltype(&bias_gelu_backward_kernel<T, kVec, GeluForm::kErf>);

template <typename T, int kVec>
BackwardKernel<T, kVec> backward_kernel(GeluForm form) {
  if (form == GeluForm::kTanh) return &bias_gelu_backward_kernel<T, kVec, GeluForm::kTanh>;
  return &bias_gelu_backward_kernel<T, kVec, GeluForm::kErf>;
}

// How stage 1 covers [rows, cols]: blocks over the columns as in the forward, and the rows cut
// into as many strips as make one wave of blocks fill the GPU, but no more than leave each
// thread kMinRowsPerThread rows. Stage 2 then adds `strips` numbers per column: a few dozen to a
// few hundred. The plan depends only on the shape, the vector width and the GPU.
struct Plan {
  dim3 grid;
  dim3 block;
  int64_t rows_per_strip = 0;
};

template <typename T, int kVec>
Plan plan_strips(int64_t rows, int64_t cols, GeluForm form) {
  Plan plan;
  const int vecs = static_cast<int>(cols / kVec);
  plan.block = block_over_columns(vecs, kBlockThreads);
  const int64_t column_blocks = (vecs + plan.block.x - 1) / plan.block.x;
  int device = 0;
  int sms = 1;
  int per_sm = 0;
  cudaGetDevice(&device);
  cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, device);
  cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, backward_kernel<T, kVec>(form), kBlockThreads, 0);
  const int64_t resident = static_cast<int64_t>(sms) * std::max(per_sm, 1);
  const int64_t rows_per_block = static_cast<int64_t>(plan.block.y) * kMinRowsPerThread;
  const int64_t strips_for_rows = (rows + rows_per_block - 1) / rows_per_block;
  int64_t strips = std::min({std::max<int64_t>(resident / column_blocks, 1), strips_for_rows, int64_t{65535}});
  strips = std::max<int64_t>(strips, 1);
  plan.rows_per_strip = (rows + strips - 1) / strips;
  strips = (rows + plan.rows_per_strip - 1) / plan.rows_per_strip;  // no strip left empty
  plan.grid = dim3(static_cast<unsigned>(column_blocks), static_cast<unsigned>(strips));
  return plan;
}

template <typename T>
bool vectorized(const T* dy, const T* x, const T* bias, const T* dx, int64_t cols) {
  return vector_width<T>() > 1 && whole_vectors(cols, vector_width<T>(), {dy, x, bias, dx});
}

template <typename T>
Plan plan_for(const T* dy, const T* x, const T* bias, const T* dx, int64_t rows, int64_t cols, GeluForm form) {
  constexpr int kVec = vector_width<T>();
  return vectorized(dy, x, bias, dx, cols) ? plan_strips<T, kVec>(rows, cols, form)
                                           : plan_strips<T, 1>(rows, cols, form);
}

template <typename T, int kVec>
cudaError_t launch_backward(const T* dy, const T* x, const T* bias, T* dx, acc_type_t<T>* partials, T* dbias,
                            int64_t rows, int64_t cols, GeluForm form, cudaStream_t stream) {
  const Plan plan = plan_strips<T, kVec>(rows, cols, form);
  backward_kernel<T, kVec>(form)<<<plan.grid, plan.block, 0, stream>>>(dy, x, bias, dx, partials, rows,
                                                                         static_cast<int>(cols / kVec),
                                                                         plan.rows_per_strip);
  const cudaError_t error = cudaGetLastError();
  if (error != cudaSuccess) return error;
  const int sum_blocks = static_cast<int>((cols + kSumThreads - 1) / kSumThreads);
  sum_strips_kernel<T><<<sum_blocks, kSumThreads, 0, stream>>>(partials, dbias, static_cast<int>(plan.grid.y),
                                                               static_cast<int>(cols));
  return cudaGetLastError();
}

}  // namespace

template <typename T>
int64_t bias_gelu_backward_strips(const T* dy, const T* x, const T* bias, const T* dx, int64_t rows, int64_t cols,
                                  GeluForm form) {
  return plan_for(dy, x, bias, dx, rows, cols, form).grid.y;
}

template <typename T>
cudaError_t launch_bias_gelu_backward(const T* dy, const T* x, const T* bias, T* dx, acc_type_t<T>* partials,
                                      T* dbias, int64_t rows, int64_t cols, GeluForm form, cudaStream_t stream) {
  constexpr int kVec = vector_width<T>();
  if (vectorized(dy, x, bias, dx, cols)) {
    return launch_backward<T, kVec>(dy, x, bias, dx, partials, dbias, rows, cols, form, stream);
  }
  return launch_backward<T, 1>(dy, x, bias, dx, partials, dbias, rows, cols, form, stream);
}

#define INSTANTIATE_BIAS_GELU_BACKWARD(T)                                                                     \
  template int64_t bias_gelu_backward_strips<T>(const T*, const T*, const T*, const T*, int64_t, int64_t,     \
                                                GeluForm);                                                    \
  template cudaError_t launch_bias_gelu_backward<T>(const T*, const T*, const T*, T*, acc_type_t<T>*, T*,       \
                                                    int64_t, int64_t, GeluForm, cudaStream_t);
INSTANTIATE_BIAS_GELU_BACKWARD(__half)
INSTANTIATE_BIAS_GELU_BACKWARD(__nv_bfloat16)
INSTANTIATE_BIAS_GELU_BACKWARD(float)
INSTANTIATE_BIAS_GELU_BACKWARD(double)

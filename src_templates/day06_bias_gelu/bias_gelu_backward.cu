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
COURSE_TODO("day06: bias_gelu_backward.cu, bias_gelu_backward_kernel: dx for this thread's rows of the strip while summing it per column, the block's row of partials, and plan_strips: how many strips, then delete this line");
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
  //   1. dx = dy * gelu_grad<kForm>(x + bias) for this thread's vector column v of every row of
  //      the strip it takes (the block's threadIdx.y rows share the strip's rows among them), a
  //      Vec at a time, in acc_t; this thread's bias loaded once; each unrounded d added to
  //      sums[e]: dbias is the sum of the exact terms, not of rounded dx.
  //   2. The block's meeting: the sums of the block's threadIdx.y rows of threads, column by
  //      column, through block_sums, into partials[blockIdx.y * cols + col] for the block's
  //      columns (col < cols). What must hold: every thread reaches the __syncthreads (a thread
  //      past the row's end has no rows, and no early return); each column's terms are added in
  //      an order the grid alone fixes, never by atomicAdd, so two calls give the same bits.
}

COURSE_TODO("day06: bias_gelu_backward.cu, sum_strips_kernel: one thread per column adds the strips' partial sums in order, then delete this line");
// partials: [strips, cols]; dbias[col] = the sum of column col over the strips.
template <typename T>
// TODO(day06): __launch_bounds__(your block's threads) here tells nvcc how many registers a thread may use
__global__ void
sum_strips_kernel(const acc_type_t<T>* __restrict__ partials, T* __restrict__ dbias, int strips, int cols) {
  const int col = blockIdx.x * blockDim.x + threadIdx.x;
  // TODO(day06): dbias[col] = the sum of partials[s][col] over the strips s = 0, 1, ..., strips - 1,
  // in that order (the same bits on every call), in acc_type_t<T>, rounded once at the end. What
  // must hold: every column covered by the launch at the end of this file, which is yours (the
  // kernel's __launch_bounds__ too); no thread past the last column touches memory; s * cols may
  // pass 2^31.
}

template <typename T, int kVec>
using BackwardKernel = decltype(&bias_gelu_backward_kernel<T, kVec, GeluForm::kErf>);

template <typename T, int kVec>
BackwardKernel<T, kVec> backward_kernel(GeluForm form) {
  if (form == GeluForm::kTanh) return &bias_gelu_backward_kernel<T, kVec, GeluForm::kTanh>;
  return &bias_gelu_backward_kernel<T, kVec, GeluForm::kErf>;
}

// How stage 1 covers [rows, cols]: grid.x blocks of `block` (kBlockThreads threads) over the
// vector columns, and grid.y strips of rows_per_strip rows each, one row of partials a strip.
// TODO(day06): how many strips: plan_strips below.
struct Plan {
  dim3 grid;
  dim3 block;
  int64_t rows_per_strip = 0;
};

template <typename T, int kVec>
Plan plan_strips(int64_t rows, int64_t cols, GeluForm form) {
  // TODO(day06): the plan bias_gelu_backward_kernel is launched with (part of its TODO): yours to
  // decide is how many strips the rows are cut into, which is when to split the column sums over
  // blocks. What must hold: block.x * block.y == kBlockThreads (block_sums is sized by it);
  // grid.x * block.x * kVec covers the row; grid.y * rows_per_strip >= rows, with no strip left
  // empty and grid.y <= 65535; and the plan depends only on the shape, the vector width and the
  // GPU, never on timing (it fixes the order of every sum). Too few strips leave SMs idle; every
  // strip is one more row of partials for sum_strips_kernel to read.
  (void)rows, (void)cols, (void)form;
  return Plan{};
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
  // TODO(day06): launch sum_strips_kernel<T> on `stream` over the `cols` columns of the
  // plan.grid.y rows of partials, with a block and grid of your choice, and return
  // cudaGetLastError().
  return cudaErrorNotYetImplemented;
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

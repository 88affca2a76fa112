// RMSNorm forward: the row held in registers.
//
//   rstd = 1 / sqrt(Σx² / D + eps),   y = x · rstd · w
//
// LayerNorm needed two sums (the mean, then the variance around it); RMSNorm needs one, over
// the squares, so a row costs one reduction: a thread loads its share of the row as 16-byte
// vectors, sums their squares, the row's threads add up (row_reduce_sum), and each thread
// writes its y from the vectors it still holds. x is read once and y written once.
//
// Version 2 (rms_norm_forward_wide_kernel) takes the rows version 1 cannot hold: the same
// math, with the row walked twice (rmsnorm_row.cuh, "Version 2").
#include "rmsnorm_row.cuh"

namespace {

// Block (threads_per_row, rows_per_block); thread (t, r) owns vectors t, t + threads_per_row,
// ... of row r of the block's current group of rows.
template <typename T, int kVec, int kVecsPerThread>
__global__ void __launch_bounds__(kMaxThreadsPerRow)
rms_norm_forward_kernel(const T* __restrict__ x, const T* __restrict__ w, T* __restrict__ y,
                        float* __restrict__ rstd_out, int64_t rows, int cols, float eps) {
  using Vec = AlignedVector<T, kVec>;
  const int vecs = cols / kVec;
  const Vec* w_vecs = reinterpret_cast<const Vec*>(w);
  const int64_t row_step = static_cast<int64_t>(gridDim.x) * blockDim.y;
  // Every thread runs the loop as often as the block does: the row sums need them all.
  for (int64_t first_row = static_cast<int64_t>(blockIdx.x) * blockDim.y; first_row < rows;
       first_row += row_step) {
    const int64_t row = first_row + threadIdx.y;
    const bool active = row < rows;
    const Vec* x_row = reinterpret_cast<const Vec*>(x + row * cols);
    Vec* y_row = reinterpret_cast<Vec*>(y + row * cols);

    // BEGIN SOLUTION
    Vec held[kVecsPerThread];
    float squares = 0.0f;
#pragma unroll
    for (int k = 0; k < kVecsPerThread; ++k) {
      const int v = k * blockDim.x + threadIdx.x;
      if (active && v < vecs) {
        held[k] = x_row[v];
#pragma unroll
        for (int e = 0; e < kVec; ++e) squares += to_acc(held[k].val[e]) * to_acc(held[k].val[e]);
      }
    }
    // sqrtf and / round correctly (no fast math): where mean + eps is a power of 4, rstd is exact.
    const float rstd = 1.0f / sqrtf(row_reduce_sum(squares) / cols + eps);

#pragma unroll
    for (int k = 0; k < kVecsPerThread; ++k) {
      const int v = k * blockDim.x + threadIdx.x;
      if (active && v < vecs) {
        Vec out;
        if (w_vecs != nullptr) {
          const Vec wv = w_vecs[v];  // the same for every row: from L1
#pragma unroll
          for (int e = 0; e < kVec; ++e) out.val[e] = from_acc<T>(to_acc(held[k].val[e]) * rstd * to_acc(wv.val[e]));
        } else {
#pragma unroll
          for (int e = 0; e < kVec; ++e) out.val[e] = from_acc<T>(to_acc(held[k].val[e]) * rstd);
        }
        y_row[v] = out;
      }
    }
    if (active && threadIdx.x == 0) rstd_out[row] = rstd;
    // STUB
    // TODO(day09): load this thread's vectors of the row into registers, sum their squares in float,
    // rstd = 1.0f / sqrtf(row_reduce_sum(squares) / cols + eps); write y = x * rstd * w (w may be nullptr:
    // ones) and, from thread 0 of the row, rstd_out[row]
    (void)x_row, (void)y_row, (void)w_vecs, (void)active, (void)vecs, (void)eps, (void)rstd_out;
    // END SOLUTION
  }
}

// Version 2: a block per row. Pass 1 sums the squares; pass 2 reads x again (from L2) and
// writes y = x · rstd · w.
template <typename T, int kVec>
__global__ void __launch_bounds__(kWideThreads, 1)  // the 1: else ptxas may budget registers for two blocks, and spill
rms_norm_forward_wide_kernel(const T* __restrict__ x, const T* __restrict__ w, T* __restrict__ y,
                             float* __restrict__ rstd_out, int64_t rows, int64_t cols, float eps) {
  using Vec = AlignedVector<T, kVec>;
  const int64_t vecs = cols / kVec;
  const int64_t step = static_cast<int64_t>(kWideUnroll) * blockDim.x;
  const Vec* w_vecs = reinterpret_cast<const Vec*>(w);
  for (int64_t row = blockIdx.x; row < rows; row += gridDim.x) {  // the whole block: the sum needs it
    const Vec* x_row = reinterpret_cast<const Vec*>(x + row * cols);
    Vec* y_row = reinterpret_cast<Vec*>(y + row * cols);
    float squares = 0.0f;
#pragma unroll 1  // a step's loads are its unrolling: more would hold more registers than a thread has
    for (int64_t first = threadIdx.x; first < vecs; first += step) {
      Vec held[kWideUnroll];
      load_step(x_row, first, vecs, held);
#pragma unroll
      for (int k = 0; k < kWideUnroll; ++k) {
        if (first + static_cast<int64_t>(k) * blockDim.x >= vecs) continue;
#pragma unroll
        for (int e = 0; e < kVec; ++e) squares += widen_at(held[k], e) * widen_at(held[k], e);
      }
    }
    const float rstd = 1.0f / sqrtf(row_reduce_sum(squares) / static_cast<float>(cols) + eps);

#pragma unroll 1  // a step's loads are its unrolling: more would hold more registers than a thread has
    for (int64_t first = threadIdx.x; first < vecs; first += step) {
      Vec held[kWideUnroll];
      load_step(x_row, first, vecs, held);
#pragma unroll
      for (int k = 0; k < kWideUnroll; ++k) {
        const int64_t v = first + static_cast<int64_t>(k) * blockDim.x;
        if (v >= vecs) continue;
        Vec out;
        const Vec wv = w_vecs != nullptr ? w_vecs[v] : Vec{};
#pragma unroll
        for (int e = 0; e < kVec; ++e) {
          const float scaled = widen_at(held[k], e) * rstd;
          out.val[e] = from_acc<T>(w_vecs != nullptr ? scaled * widen_at(wv, e) : scaled);
        }
        y_row[v] = out;
      }
    }
    if (threadIdx.x == 0) rstd_out[row] = rstd;
  }
}

template <typename T>
struct ForwardKernel {
  template <int kVec, int kVecs>
  struct Instance {
    static auto get() { return &rms_norm_forward_kernel<T, kVec, kVecs>; }
  };
};

}  // namespace

// BEGIN SOLUTION
// STUB
COURSE_TODO("day09: rmsnorm_forward.cu, rms_norm_forward_kernel: the row in registers, one sum of squares, y = x * rstd * w, then delete this line");
// END SOLUTION

template <typename T>
cudaError_t launch_rms_norm_forward(const T* x, const T* w, T* y, float* rstd, int64_t rows, int64_t cols,
                                    float eps, cudaStream_t stream) {
  const bool aligned = is_aligned(x) && is_aligned(y) && (w == nullptr || is_aligned(w));
  const RowPlan plan = rms_row_plan(cols, sizeof(T), aligned);
  if (rows == 0) return cudaSuccess;
  if (!plan.fits()) {  // version 2
    const int blocks = static_cast<int>(wide_blocks(rows, cols * static_cast<int64_t>(sizeof(T))));
    auto kernel = wide_vec<T>(cols, aligned) == 1 ? &rms_norm_forward_wide_kernel<T, 1>
                                                  : &rms_norm_forward_wide_kernel<T, kVectorBytes / sizeof(T)>;
    kernel<<<blocks, kWideThreads, 0, stream>>>(x, w, y, rstd, rows, cols, eps);
    return cudaGetLastError();
  }
  // BEGIN SOLUTION
  const int64_t groups = (rows + plan.rows_per_block - 1) / plan.rows_per_block;
  const int blocks = static_cast<int>(groups < kMaxBlocks ? groups : kMaxBlocks);
  kernel_for<T, ForwardKernel<T>::template Instance>(plan)<<<blocks, dim3(plan.threads_per_row,
                                                                            plan.rows_per_block), 0, stream>>>(
      x, w, y, rstd, rows, static_cast<int>(cols), eps);
  return cudaGetLastError();
  // STUB
  // TODO(day09): launch version 1 (kernel_for<T, ForwardKernel<T>::template Instance>(plan): the
  // instance that holds plan.vecs_per_thread vectors) on `stream`, and return cudaGetLastError().
  // The block is the plan's, dim3(plan.threads_per_row, plan.rows_per_block): the kernel reads
  // its row layout from blockDim. The grid is yours: how many groups of rows it starts at once,
  // given that the kernel loops over the rest (at most 2^31 - 1 blocks). The perf case times it.
  return cudaErrorNotYetImplemented;
  // END SOLUTION
}

#define INSTANTIATE_LAUNCH_RMS_NORM_FORWARD(T)                                                                  \
  template cudaError_t launch_rms_norm_forward<T>(const T*, const T*, T*, float*, int64_t, int64_t, float, \
                                                  cudaStream_t);
INSTANTIATE_LAUNCH_RMS_NORM_FORWARD(__half)
INSTANTIATE_LAUNCH_RMS_NORM_FORWARD(__nv_bfloat16)
INSTANTIATE_LAUNCH_RMS_NORM_FORWARD(float)

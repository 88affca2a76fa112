// RMSNorm backward: dx, and dw's sums over rows, in one pass.
//
// With x̂ = x · rstd (rstd saved by the forward) and g = dy · w:
//   dx_j = rstd · (g_j − x̂_j · mean(g · x̂))      one sum over the row
//   dw_j = Σ_rows dy_j · x̂_j                      a sum over the column
//
// As in day05's fused backward, a block walks a strip of rows, and each thread owns the same
// columns of every row it visits: it computes dx for them, and adds dy · x̂ to running sums of
// its columns. Here the running sums stay in registers (32 columns a thread: 32 floats), and
// at the end each row group of the block writes them as one row of partial sums, which a second
// kernel adds up (a [groups, D] sum: small next to x). x and dy come from memory once, and no
// atomics run, so the sums' order is fixed and results repeat bit for bit.
//
// Version 2, for the rows version 1 cannot hold (rmsnorm_row.cuh, "Version 2"): the two sums
// come apart. dx is a row's business: a block per row walks it twice (the second time from
// L2). dw is a column's: a column-tiled kernel reads x and dy once more and sums dy · x̂ down
// a strip of rows into the same partial rows. x and dy come from memory twice, not once: the
// price of a row that does not stay on the chip.
#include "rmsnorm_row.cuh"

namespace {

template <typename T, int kVec, int kVecsPerThread>
__global__ void __launch_bounds__(kMaxThreadsPerRow)
rms_norm_backward_kernel(const T* __restrict__ dy, const T* __restrict__ x, const T* __restrict__ w,
                         const float* __restrict__ rstd, T* __restrict__ dx, float* __restrict__ dw_partials,
                         int64_t rows, int cols) {
  using Vec = AlignedVector<T, kVec>;
  const int vecs = cols / kVec;
  const Vec* w_vecs = reinterpret_cast<const Vec*>(w);
  float dw_sums[kVecsPerThread][kVec] = {};
  const int64_t row_step = static_cast<int64_t>(gridDim.x) * blockDim.y;
  for (int64_t first_row = static_cast<int64_t>(blockIdx.x) * blockDim.y; first_row < rows;
       first_row += row_step) {
    const int64_t row = first_row + threadIdx.y;
    const bool active = row < rows;  // an idle thread stays for the row sums, adding zeros
    const Vec* x_row = reinterpret_cast<const Vec*>(x + row * cols);
    const Vec* dy_row = reinterpret_cast<const Vec*>(dy + row * cols);
    Vec* dx_row = reinterpret_cast<Vec*>(dx + row * cols);
    const float row_rstd = active ? rstd[row] : 0.0f;

    // TODO(day09): hold this thread's vectors of x in registers; sum g * x̂ over the row (row_reduce_sum)
    // while adding dy * x̂ to dw_sums[k][e]; then dx = rstd * (g - x̂ * mean(g * x̂)), reading dy again
    (void)x_row, (void)dy_row, (void)dx_row, (void)row_rstd, (void)vecs, (void)w_vecs;
  }

  // This row group's partial row: its thread t holds columns (k · blockDim.x + t) · kVec + e.
  float* partial = dw_partials + (static_cast<int64_t>(blockIdx.x) * blockDim.y + threadIdx.y) * cols;
#pragma unroll
  for (int k = 0; k < kVecsPerThread; ++k) {
    const int v = k * blockDim.x + threadIdx.x;
    if (v < vecs) {
#pragma unroll
      for (int e = 0; e < kVec; ++e) partial[v * kVec + e] = dw_sums[k][e];
    }
  }
}

// Stage 2: dw_j = the sum of column j over the partial rows, in a fixed order (day05's stage
// 2, for one sum). Block b takes columns 32b .. 32b + 31: thread (c, lane) adds rows lane,
// lane + 32, ... of its column (a warp reads 32 neighbouring floats of a row), and the 32 lanes
// meet in shared memory. One launch: ATen's sum and cast would be two, each with more host work.
constexpr int kSumColumns = 32;
constexpr int kSumLanes = 32;

template <typename T>
__global__ void sum_partial_rows_kernel(const float* __restrict__ partials, T* __restrict__ dw,
                                        int64_t partial_rows, int cols) {
  __shared__ float lanes[kSumLanes][kSumColumns];
  const int col = blockIdx.x * kSumColumns + threadIdx.x;
  float sum = 0.0f;
  if (col < cols) {
    for (int64_t p = threadIdx.y; p < partial_rows; p += kSumLanes) sum += partials[p * cols + col];
  }
  lanes[threadIdx.y][threadIdx.x] = sum;
  __syncthreads();
  if (threadIdx.y == 0 && col < cols) {
    for (int lane = 1; lane < kSumLanes; ++lane) sum += lanes[lane][threadIdx.x];
    dw[col] = from_acc<T>(sum);
  }
}

// Version 2, dx: a block per row. Pass 1 sums g · x̂; pass 2 reads x and dy again (from L2)
// and writes dx.
template <typename T, int kVec>
__global__ void __launch_bounds__(kWideThreads, 1)  // the 1: else ptxas may budget registers for two blocks, and spill
rms_norm_backward_wide_dx_kernel(const T* __restrict__ dy, const T* __restrict__ x, const T* __restrict__ w,
                                 const float* __restrict__ rstd, T* __restrict__ dx, int64_t rows, int64_t cols) {
  using Vec = AlignedVector<T, kVec>;
  const int64_t vecs = cols / kVec;
  const int64_t step = static_cast<int64_t>(kWideUnroll) * blockDim.x;
  const Vec* w_vecs = reinterpret_cast<const Vec*>(w);
  for (int64_t row = blockIdx.x; row < rows; row += gridDim.x) {  // the whole block: the sum needs it
    const Vec* x_row = reinterpret_cast<const Vec*>(x + row * cols);
    const Vec* dy_row = reinterpret_cast<const Vec*>(dy + row * cols);
    Vec* dx_row = reinterpret_cast<Vec*>(dx + row * cols);
    const float row_rstd = rstd[row];
    float sum_g_xhat = 0.0f;
#pragma unroll 1  // a step's loads are its unrolling: more would hold more registers than a thread has
    for (int64_t first = threadIdx.x; first < vecs; first += step) {
      Vec x_held[kWideUnroll], dy_held[kWideUnroll];
      load_step(x_row, first, vecs, x_held);
      load_step(dy_row, first, vecs, dy_held);
#pragma unroll
      for (int k = 0; k < kWideUnroll; ++k) {
        const int64_t v = first + static_cast<int64_t>(k) * blockDim.x;
        if (v >= vecs) continue;
        const Vec wv = w_vecs != nullptr ? w_vecs[v] : Vec{};
#pragma unroll
        for (int e = 0; e < kVec; ++e) {
          const float g = widen_at(dy_held[k], e) * (w_vecs != nullptr ? widen_at(wv, e) : 1.0f);
          sum_g_xhat += g * (widen_at(x_held[k], e) * row_rstd);
        }
      }
    }
    const float mean_g_xhat = row_reduce_sum(sum_g_xhat) / static_cast<float>(cols);

#pragma unroll 1  // a step's loads are its unrolling: more would hold more registers than a thread has
    for (int64_t first = threadIdx.x; first < vecs; first += step) {
      Vec x_held[kWideUnroll], dy_held[kWideUnroll];
      load_step(x_row, first, vecs, x_held);
      load_step(dy_row, first, vecs, dy_held);
#pragma unroll
      for (int k = 0; k < kWideUnroll; ++k) {
        const int64_t v = first + static_cast<int64_t>(k) * blockDim.x;
        if (v >= vecs) continue;
        const Vec wv = w_vecs != nullptr ? w_vecs[v] : Vec{};
        Vec out;
#pragma unroll
        for (int e = 0; e < kVec; ++e) {
          const float xhat = widen_at(x_held[k], e) * row_rstd;
          const float g = widen_at(dy_held[k], e) * (w_vecs != nullptr ? widen_at(wv, e) : 1.0f);
          out.val[e] = from_acc<T>(row_rstd * (g - xhat * mean_g_xhat));
        }
        dx_row[v] = out;
      }
    }
  }
}

// Version 2, dw: block (c, s) owns vectors c · blockDim.x + threadIdx.x of every row of strip
// s, sums dy · x̂ down the strip in registers, and writes them into partial row s. A warp reads
// neighbouring vectors of a row; each thread has a row's loads in flight per unrolled step.
constexpr int kColumnThreads = 256;

template <typename T, int kVec>
__global__ void __launch_bounds__(kColumnThreads)
rms_norm_dw_columns_kernel(const T* __restrict__ dy, const T* __restrict__ x, const float* __restrict__ rstd,
                           float* __restrict__ dw_partials, int64_t rows, int64_t cols, int64_t rows_per_strip) {
  using Vec = AlignedVector<T, kVec>;
  const int64_t v = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (v >= cols / kVec) return;
  const int64_t begin = static_cast<int64_t>(blockIdx.y) * rows_per_strip;
  const int64_t end = begin + rows_per_strip < rows ? begin + rows_per_strip : rows;
  float sums[kVec] = {};
#pragma unroll 4
  for (int64_t row = begin; row < end; ++row) {
    const Vec xv = reinterpret_cast<const Vec*>(x + row * cols)[v];
    const Vec dyv = reinterpret_cast<const Vec*>(dy + row * cols)[v];
    const float row_rstd = rstd[row];
#pragma unroll
    for (int e = 0; e < kVec; ++e) sums[e] += widen_at(dyv, e) * (widen_at(xv, e) * row_rstd);
  }
  float* partial = dw_partials + blockIdx.y * cols + v * kVec;
#pragma unroll
  for (int e = 0; e < kVec; ++e) partial[e] = sums[e];
}

template <typename T>
struct BackwardKernel {
  template <int kVec, int kVecs>
  struct Instance {
    static auto get() { return &rms_norm_backward_kernel<T, kVec, kVecs>; }
  };
};

// How many blocks version 1 of the backward runs: each of its row groups (blockDim.y of
// them a block) writes one row of dw's partial sums. TODO(day09): the answer is yours.
template <typename T>
int64_t blocks_for(const RowPlan& plan, int64_t rows) {
  // TODO(day09): yours to decide: how many blocks of the plan's block,
  // dim3(plan.threads_per_row, plan.rows_per_block), run the backward's version 1, so when to
  // split dw's column sums over blocks. The kernel loops over the rows its grid does not reach;
  // every row group writes one row of partial sums, which the operator allocates from this
  // answer and a second kernel adds up. What must hold: at least 1 block, at most 2^31 - 1,
  // and the same answer for the same shape and GPU (it fixes the order of dw's sums). Too few
  // blocks leave SMs idle; each one more is a row of partials more to write and read
  // (cudaOccupancyMaxActiveBlocksPerMultiprocessor says how many of a kernel's blocks an SM holds).
  (void)plan, (void)rows;
  return 1;
}

bool backward_aligned(const void* dy, const void* x, const void* w, const void* dx) {
  return is_aligned(dy) && is_aligned(x) && (w == nullptr || is_aligned(w)) && is_aligned(dx);
}

}  // namespace

COURSE_TODO("day09: rmsnorm_backward.cu, rms_norm_backward_kernel: dx and the running sums of dy * x̂ per column, and blocks_for: how many blocks, then delete this line");

namespace {

// Version 2's strips: enough column-tile blocks to fill the GPU several times over.
int64_t wide_strips(int64_t rows, int64_t cols, int vec) {
  int device = 0, sms = 0;
  cudaGetDevice(&device);
  cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, device);
  const int64_t tiles = (cols / vec + kColumnThreads - 1) / kColumnThreads;
  const int64_t wanted = (8 * static_cast<int64_t>(sms) + tiles - 1) / tiles;
  const int64_t strips = wanted < kMaxBlocks ? wanted : kMaxBlocks;
  return rows < strips ? rows : strips;
}

template <typename T>
cudaError_t launch_backward_wide(const T* dy, const T* x, const T* w, const float* rstd, T* dx, float* dw_partials,
                                 int64_t rows, int64_t cols, int vec, cudaStream_t stream) {
  const int dx_blocks = static_cast<int>(wide_blocks(rows, 2 * cols * static_cast<int64_t>(sizeof(T))));
  auto dx_kernel = vec == 1 ? &rms_norm_backward_wide_dx_kernel<T, 1>
                            : &rms_norm_backward_wide_dx_kernel<T, kVectorBytes / sizeof(T)>;
  dx_kernel<<<dx_blocks, kWideThreads, 0, stream>>>(dy, x, w, rstd, dx, rows, cols);
  const cudaError_t error = cudaGetLastError();
  if (error != cudaSuccess) return error;
  const int64_t strips = wide_strips(rows, cols, vec);
  const dim3 grid(static_cast<unsigned>((cols / vec + kColumnThreads - 1) / kColumnThreads),
                  static_cast<unsigned>(strips));
  auto dw_kernel = vec == 1 ? &rms_norm_dw_columns_kernel<T, 1>
                            : &rms_norm_dw_columns_kernel<T, kVectorBytes / sizeof(T)>;
  dw_kernel<<<grid, kColumnThreads, 0, stream>>>(dy, x, rstd, dw_partials, rows, cols, (rows + strips - 1) / strips);
  return cudaGetLastError();
}

}  // namespace

template <typename T>
int64_t rms_norm_backward_partial_rows(const T* dy, const T* x, const T* w, const T* dx, int64_t rows,
                                       int64_t cols) {
  const bool aligned = backward_aligned(dy, x, w, dx);
  const RowPlan plan = rms_row_plan(cols, sizeof(T), aligned);
  if (rows == 0) return 0;
  if (!plan.fits()) return wide_strips(rows, cols, wide_vec<T>(cols, aligned));
  return blocks_for<T>(plan, rows) * plan.rows_per_block;
}

template <typename T>
cudaError_t launch_rms_norm_backward(const T* dy, const T* x, const T* w, const float* rstd, T* dx,
                                     float* dw_partials, T* dw, int64_t rows, int64_t cols, cudaStream_t stream) {
  const bool aligned = backward_aligned(dy, x, w, dx);
  const RowPlan plan = rms_row_plan(cols, sizeof(T), aligned);
  if (rows == 0) return cudaSuccess;
  const int64_t partial_rows = rms_norm_backward_partial_rows(dy, x, w, dx, rows, cols);
  if (plan.fits()) {
    kernel_for<T, BackwardKernel<T>::template Instance>(plan)<<<static_cast<int>(partial_rows / plan.rows_per_block),
                                                               dim3(plan.threads_per_row, plan.rows_per_block), 0,
                                                               stream>>>(dy, x, w, rstd, dx, dw_partials, rows,
                                                                         static_cast<int>(cols));
  } else {
    const cudaError_t error = launch_backward_wide(dy, x, w, rstd, dx, dw_partials, rows, cols,
                                                   wide_vec<T>(cols, aligned), stream);
    if (error != cudaSuccess) return error;
  }
  const cudaError_t error = cudaGetLastError();
  if (error != cudaSuccess) return error;
  const int sum_blocks = static_cast<int>((cols + kSumColumns - 1) / kSumColumns);
  sum_partial_rows_kernel<T><<<sum_blocks, dim3(kSumColumns, kSumLanes), 0, stream>>>(dw_partials, dw, partial_rows,
                                                                                        static_cast<int>(cols));
  return cudaGetLastError();
}

#define INSTANTIATE_RMS_NORM_BACKWARD(T)                                                                        \
  template int64_t rms_norm_backward_partial_rows<T>(const T*, const T*, const T*, const T*, int64_t, int64_t); \
  template cudaError_t launch_rms_norm_backward<T>(const T*, const T*, const T*, const float*, T*, float*, T*,     \
                                                   int64_t, int64_t, cudaStream_t);
INSTANTIATE_RMS_NORM_BACKWARD(__half)
INSTANTIATE_RMS_NORM_BACKWARD(__nv_bfloat16)
INSTANTIATE_RMS_NORM_BACKWARD(float)

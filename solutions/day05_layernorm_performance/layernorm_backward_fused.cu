// LayerNorm backward, version 2: dx and the partial sums of dγ and dβ in one pass.
//
// With x̂ = (x − mean)·rstd (mean and rstd saved by the forward) and g = dy·γ:
//   dx_j = rstd · (g_j − mean(g) − x̂_j · mean(g·x̂))     a sum over the row
//   dγ_j = Σ_rows dy_j · x̂_j,   dβ_j = Σ_rows dy_j       a sum over the column
//
// Version 1 (day04) reads x and dy in two kernels: once for dx, once more for dγ and dβ.
// Here a block walks a strip of rows: for each row it computes dx, and each thread adds dy·x̂
// and dy for the columns it owns into registers, across all the rows it visits. At the end
// the block's partial sums go to one row of a small partial buffer, and a second, small
// kernel adds the blocks' rows up per column. x and dy are read from memory once, and nothing
// is summed with atomics: the order of every sum is fixed by the grid, so results repeat bit
// for bit on the same GPU.
//
// Rows are split among threads as in the forward's version 4 (plan_rows), and a block holds
// as many rows as fit in 256 threads: their sums meet in shared memory before the block's row
// of partials is written. Fewer, fuller blocks mean fewer partial rows to write and add up.
// A thread holds its vectors of x and dy (for the second pass) and the running dγ, dβ of its
// columns (for every row it visits): 16 to 24 columns, more only where a row would need over
// 512 threads. The sums cost two fp32 registers a column whatever the dtype, so fewer columns
// per thread means more threads on each SM, and more loads in flight. 16-bit x and dy take
// half the registers of fp32's, so there a thread takes two rows at a time: as many bytes in
// flight as fp32, for the same sums.
#include <type_traits>

#include "row_math.cuh"

namespace {

constexpr int kMinAccumulated = 16;    // columns whose dγ, dβ a thread keeps in registers ...
constexpr int kMaxAccumulated = 24;    // ... at most: 24 fp32 columns use about 120 registers
constexpr int kMaxThreadsPerRow = 512;
constexpr int kSumColumns = 32;        // stage 2: a block adds the partials of 32 columns ...
constexpr int kSumLanes = 32;          // ... with 32 threads per column

// Rows a thread takes at a time: two for 16-bit types, unless a thread owns more than 16
// columns (the second row's x and dy would not fit in registers beside the sums).
template <typename T>
constexpr int rows_at_once(int vecs_per_thread, int vec) {
  return sizeof(T) == 2 && vecs_per_thread * vec <= kMinAccumulated ? 2 : 1;
}

// Sums of a[r] and b[r] over the threads of each row (threadIdx.x), for the kRows rows a
// thread holds; every thread of the row receives them. Up to a warp per row: xor-shuffles
// inside the row's lanes. Longer rows: the warps' sums meet in shared memory, one pair of
// barriers for all 2·kRows sums, and each thread adds its row's warps in the same order.
template <int kRows, typename acc_t>
__device__ __forceinline__ void row_reduce_sums(acc_t (&a)[kRows], acc_t (&b)[kRows]) {
  const int width = blockDim.x < kWarpSize ? blockDim.x : kWarpSize;
  for (int offset = width / 2; offset > 0; offset /= 2) {
#pragma unroll
    for (int r = 0; r < kRows; ++r) {
      a[r] += __shfl_xor_sync(0xffffffffu, a[r], offset);
      b[r] += __shfl_xor_sync(0xffffffffu, b[r], offset);
    }
  }
  if (blockDim.x <= kWarpSize) return;
  __shared__ acc_t warp_sums[kMaxThreadsPerRow / kWarpSize][2 * kRows];
  const int warps_per_row = blockDim.x / kWarpSize;  // a multiple of 32 threads: plan_rows
  const int warp = (threadIdx.y * blockDim.x + threadIdx.x) / kWarpSize;
  __syncthreads();  // the previous rows' sums may still be being read
  if (threadIdx.x % kWarpSize == 0) {
#pragma unroll
    for (int r = 0; r < kRows; ++r) {
      warp_sums[warp][r] = a[r];
      warp_sums[warp][kRows + r] = b[r];
    }
  }
  __syncthreads();
  const int first_warp = threadIdx.y * warps_per_row;
#pragma unroll
  for (int r = 0; r < kRows; ++r) {
    a[r] = 0;
    b[r] = 0;
    for (int w = 0; w < warps_per_row; ++w) {
      a[r] += warp_sums[first_warp + w][r];
      b[r] += warp_sums[first_warp + w][kRows + r];
    }
  }
}

// The ", 1" (one block per SM is enough) lets a thread use up to 128 registers: without it,
// ptxas for sm_75 aimed at two 512-thread blocks per SM, 64 registers, and spilled.
template <typename T, int kVec, int kVecsPerThread, int kRows = rows_at_once<T>(kVecsPerThread, kVec)>
__global__ void __launch_bounds__(kMaxThreadsPerRow, 1)
layernorm_backward_fused_kernel(const T* __restrict__ dy, const T* __restrict__ x,
                                const T* __restrict__ gamma, const acc_type_t<T>* __restrict__ mean,
                                const acc_type_t<T>* __restrict__ rstd, T* __restrict__ dx,
                                acc_type_t<T>* __restrict__ partial_dgamma,
                                acc_type_t<T>* __restrict__ partial_dbeta, int64_t rows, int cols) {
  using acc_t = acc_type_t<T>;
  using Vec = AlignedVector<T, kVec>;
  const int vecs = cols / kVec;
  const Vec* gamma_vecs = reinterpret_cast<const Vec*>(gamma);
  acc_t dgamma[kVecsPerThread][kVec] = {};
  acc_t dbeta[kVecsPerThread][kVec] = {};

  // The block takes blockDim.y · kRows rows at a time; thread row y holds rows y, y + blockDim.y, ...
  const int64_t rows_per_step = static_cast<int64_t>(blockDim.y) * kRows;
  for (int64_t first_row = blockIdx.x * rows_per_step; first_row < rows;
       first_row += gridDim.x * rows_per_step) {
    // Every load of the rows is issued before any sum needs one, and x and dy stay in
    // registers for the second pass: memory sees each element once, and many loads wait at once.
    Vec x_held[kRows][kVecsPerThread];
    Vec dy_held[kRows][kVecsPerThread];
    int64_t row[kRows];
    bool active[kRows];  // an idle thread stays for the sums, adding zeros
    acc_t row_mean[kRows];
    acc_t row_rstd[kRows];
#pragma unroll
    for (int r = 0; r < kRows; ++r) {
      row[r] = first_row + r * blockDim.y + threadIdx.y;
      active[r] = row[r] < rows;
      row_mean[r] = active[r] ? mean[row[r]] : acc_t(0);
      row_rstd[r] = active[r] ? rstd[row[r]] : acc_t(0);
      const Vec* x_row = reinterpret_cast<const Vec*>(x + row[r] * cols);
      const Vec* dy_row = reinterpret_cast<const Vec*>(dy + row[r] * cols);
#pragma unroll
      for (int k = 0; k < kVecsPerThread; ++k) {
        const int v = k * blockDim.x + threadIdx.x;
        if (active[r] && v < vecs) {
          x_held[r][k] = x_row[v];
          dy_held[r][k] = dy_row[v];
        }
      }
    }

    acc_t sum_g[kRows];
    acc_t sum_g_xhat[kRows];
#pragma unroll
    for (int r = 0; r < kRows; ++r) {
      sum_g[r] = 0;
      sum_g_xhat[r] = 0;
#pragma unroll
      for (int k = 0; k < kVecsPerThread; ++k) {
        const int v = k * blockDim.x + threadIdx.x;
        if (active[r] && v < vecs) {
          const Vec gv = gamma_vecs[v];  // the same for every row: from L1
#pragma unroll
          for (int e = 0; e < kVec; ++e) {
            const acc_t xhat = (to_acc(x_held[r][k].val[e]) - row_mean[r]) * row_rstd[r];
            const acc_t d = to_acc(dy_held[r][k].val[e]);
            const acc_t g = d * to_acc(gv.val[e]);
            sum_g[r] += g;
            sum_g_xhat[r] += g * xhat;
            dgamma[k][e] += d * xhat;
            dbeta[k][e] += d;
          }
        }
      }
    }
    row_reduce_sums(sum_g, sum_g_xhat);

#pragma unroll
    for (int r = 0; r < kRows; ++r) {
      const acc_t mean_g = sum_g[r] / cols;
      const acc_t mean_g_xhat = sum_g_xhat[r] / cols;
      Vec* dx_row = reinterpret_cast<Vec*>(dx + row[r] * cols);
#pragma unroll
      for (int k = 0; k < kVecsPerThread; ++k) {
        const int v = k * blockDim.x + threadIdx.x;
        if (active[r] && v < vecs) {
          const Vec gv = gamma_vecs[v];
          Vec out;
#pragma unroll
          for (int e = 0; e < kVec; ++e) {
            const acc_t xhat = (to_acc(x_held[r][k].val[e]) - row_mean[r]) * row_rstd[r];
            const acc_t g = to_acc(dy_held[r][k].val[e]) * to_acc(gv.val[e]);
            out.val[e] = from_acc<T>(row_rstd[r] * (g - mean_g - xhat * mean_g_xhat));
          }
          dx_row[v] = out;
        }
      }
    }
  }

  // A block of one row: each thread's sums are the block's, for its own columns.
  if (blockDim.y == 1) {
#pragma unroll
    for (int k = 0; k < kVecsPerThread; ++k) {
#pragma unroll
      for (int e = 0; e < kVec; ++e) {
        const int col = (k * blockDim.x + threadIdx.x) * kVec + e;
        if (col < cols) {
          partial_dgamma[blockIdx.x * static_cast<int64_t>(cols) + col] = dgamma[k][e];
          partial_dbeta[blockIdx.x * static_cast<int64_t>(cols) + col] = dbeta[k][e];
        }
      }
    }
    return;
  }
  // Several rows per block (up to kPlanThreadsPerBlock threads): the groups of threadIdx.y hold sums
  // for the same columns. Add them in shared memory, one vector slot k at a time (columns
  // k·threads_per_row·kVec onwards), in the order of threadIdx.y, and write the block's row.
  __shared__ acc_t shared_dgamma[kPlanThreadsPerBlock * kVec];
  __shared__ acc_t shared_dbeta[kPlanThreadsPerBlock * kVec];
  const int thread = threadIdx.y * blockDim.x + threadIdx.x;
  const int slot_columns = blockDim.x * kVec;  // columns covered by one slot of every thread
#pragma unroll
  for (int k = 0; k < kVecsPerThread; ++k) {
#pragma unroll
    for (int e = 0; e < kVec; ++e) {
      shared_dgamma[thread * kVec + e] = dgamma[k][e];
      shared_dbeta[thread * kVec + e] = dbeta[k][e];
    }
    __syncthreads();
    for (int c = thread; c < slot_columns; c += blockDim.x * blockDim.y) {
      acc_t dgamma_sum = 0;
      acc_t dbeta_sum = 0;
      for (int group = 0; group < blockDim.y; ++group) {
        dgamma_sum += shared_dgamma[group * slot_columns + c];
        dbeta_sum += shared_dbeta[group * slot_columns + c];
      }
      const int col = k * slot_columns + c;
      if (col < cols) {
        partial_dgamma[blockIdx.x * static_cast<int64_t>(cols) + col] = dgamma_sum;
        partial_dbeta[blockIdx.x * static_cast<int64_t>(cols) + col] = dbeta_sum;
      }
    }
    __syncthreads();  // the next slot overwrites shared memory
  }
}

// Stage 2: block b adds up the partial rows of columns 32b .. 32b + 31. Thread (c, lane) sums
// rows lane, lane + 8, ...; the 8 lanes then meet in shared memory, always in the same order.
template <typename T>
__global__ void sum_partials_kernel(const acc_type_t<T>* __restrict__ partial_dgamma,
                                    const acc_type_t<T>* __restrict__ partial_dbeta,
                                    T* __restrict__ dgamma, T* __restrict__ dbeta,
                                    int64_t num_partials, int cols) {
  using acc_t = acc_type_t<T>;
  __shared__ acc_t dgamma_lanes[kSumLanes][kSumColumns];
  __shared__ acc_t dbeta_lanes[kSumLanes][kSumColumns];
  const int col = blockIdx.x * kSumColumns + threadIdx.x;
  acc_t dgamma_sum = 0;
  acc_t dbeta_sum = 0;
  if (col < cols) {
    for (int64_t p = threadIdx.y; p < num_partials; p += kSumLanes) {
      dgamma_sum += partial_dgamma[p * cols + col];
      dbeta_sum += partial_dbeta[p * cols + col];
    }
  }
  dgamma_lanes[threadIdx.y][threadIdx.x] = dgamma_sum;
  dbeta_lanes[threadIdx.y][threadIdx.x] = dbeta_sum;
  __syncthreads();
  if (threadIdx.y == 0 && col < cols) {
    for (int lane = 1; lane < kSumLanes; ++lane) {
      dgamma_sum += dgamma_lanes[lane][threadIdx.x];
      dbeta_sum += dbeta_lanes[lane][threadIdx.x];
    }
    dgamma[col] = from_acc<T>(dgamma_sum);
    dbeta[col] = from_acc<T>(dbeta_sum);
  }
}

template <typename T>
RowPlan fused_plan(int64_t cols, bool aligned) {
  constexpr int kVec = kVectorBytes / sizeof(T);
  RowPlan plan = plan_rows(cols, sizeof(T), aligned, kMinAccumulated / kVec, kMaxAccumulated / kVec,
                           kMaxThreadsPerRow);
  if (plan.fits() && plan.threads_per_row * plan.rows_per_block < kPlanThreadsPerBlock) {
    plan.rows_per_block = kPlanThreadsPerBlock / plan.threads_per_row;  // as many rows as fit in 256 threads
  }
  return plan;
}

template <typename T>
using FusedKernel = decltype(&layernorm_backward_fused_kernel<T, 1, 1>);

// The instance for vecs_per_thread, looked for among kVecs, kVecs + 1, ... up to the most a
// thread may accumulate: every instance has the same parameters.
template <typename T, int kVec, int kVecs>
FusedKernel<T> fused_instance(int vecs_per_thread) {
  if constexpr (kVecs * kVec > kMaxAccumulated) {
    return nullptr;  // plan_rows never asks for more than kMaxAccumulated / kVec vectors
  } else {
    if (vecs_per_thread == kVecs) return &layernorm_backward_fused_kernel<T, kVec, kVecs>;
    return fused_instance<T, kVec, kVecs + 1>(vecs_per_thread);
  }
}

template <typename T>
FusedKernel<T> fused_kernel_for(const RowPlan& plan) {
  if (plan.vec == 1) return &layernorm_backward_fused_kernel<T, 1, 1>;
  return fused_instance<T, kVectorBytes / sizeof(T), 1>(plan.vecs_per_thread);
}

// As many blocks as fit on the GPU at once (registers and shared memory permitting), so that
// each block's partial row sums many rows; the count depends only on the GPU and the shape,
// so the order of every sum does too.
template <typename T>
int64_t resident_blocks(const RowPlan& plan) {
  int device = 0;
  int sms = 1;
  int per_sm = 0;
  cudaGetDevice(&device);
  cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, device);
  cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, fused_kernel_for<T>(plan),
                                                plan.threads_per_row * plan.rows_per_block, 0);
  return static_cast<int64_t>(sms) * (per_sm > 1 ? per_sm : 1);
}

}  // namespace

template <typename T>
int64_t layernorm_backward_fused_blocks(int64_t rows, int64_t cols, bool aligned) {
  if constexpr (std::is_same_v<T, double>) {
    return 0;  // float64 is for gradcheck, not for speed: version 1 takes it
  } else {
    const RowPlan plan = fused_plan<T>(cols, aligned);
    if (rows == 0 || !plan.fits() || fused_kernel_for<T>(plan) == nullptr) return 0;
    const int64_t rows_per_step = plan.rows_per_block * rows_at_once<T>(plan.vecs_per_thread, plan.vec);
    const int64_t needed = (rows + rows_per_step - 1) / rows_per_step;
    const int64_t resident = resident_blocks<T>(plan);
    return needed < resident ? needed : resident;
  }
}

template <typename T>
cudaError_t launch_layernorm_backward_fused(const T* dy, const T* x, const T* gamma,
                                            const acc_type_t<T>* mean, const acc_type_t<T>* rstd,
                                            T* dx, acc_type_t<T>* partials, T* dgamma, T* dbeta,
                                            int64_t rows, int64_t cols, cudaStream_t stream) {
  const bool aligned = is_aligned(dy) && is_aligned(x) && is_aligned(gamma) && is_aligned(dx);
  const int64_t blocks = layernorm_backward_fused_blocks<T>(rows, cols, aligned);
  if (blocks == 0) return cudaErrorInvalidValue;  // the caller asks layernorm_backward_fused_blocks first
  if constexpr (!std::is_same_v<T, double>) {
    const RowPlan plan = fused_plan<T>(cols, aligned);
    acc_type_t<T>* partial_dgamma = partials;
    acc_type_t<T>* partial_dbeta = partials + blocks * cols;
    fused_kernel_for<T>(plan)<<<static_cast<int>(blocks), dim3(plan.threads_per_row, plan.rows_per_block), 0,
                                stream>>>(dy, x, gamma, mean, rstd, dx, partial_dgamma, partial_dbeta, rows,
                                          static_cast<int>(cols));
    const cudaError_t error = cudaGetLastError();
    if (error != cudaSuccess) return error;
    const int sum_blocks = static_cast<int>((cols + kSumColumns - 1) / kSumColumns);
    sum_partials_kernel<T><<<sum_blocks, dim3(kSumColumns, kSumLanes), 0, stream>>>(
        partial_dgamma, partial_dbeta, dgamma, dbeta, blocks, static_cast<int>(cols));
  }
  return cudaGetLastError();
}

#define INSTANTIATE_LAYERNORM_BACKWARD_FUSED(T)                                                  \
  template int64_t layernorm_backward_fused_blocks<T>(int64_t, int64_t, bool);                   \
  template cudaError_t launch_layernorm_backward_fused<T>(                                       \
      const T*, const T*, const T*, const acc_type_t<T>*, const acc_type_t<T>*, T*,              \
      acc_type_t<T>*, T*, T*, int64_t, int64_t, cudaStream_t);
INSTANTIATE_LAYERNORM_BACKWARD_FUSED(__half)
INSTANTIATE_LAYERNORM_BACKWARD_FUSED(__nv_bfloat16)
INSTANTIATE_LAYERNORM_BACKWARD_FUSED(float)
INSTANTIATE_LAYERNORM_BACKWARD_FUSED(double)

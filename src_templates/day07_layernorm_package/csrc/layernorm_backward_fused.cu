// LayerNorm backward, version 2: dx and the partial sums of dγ and dβ in one pass.
//
// With x̂ = (x − mean)·rstd (mean and rstd saved by the forward) and g = dy·γ:
//   dx_j = rstd · (g_j − mean(g) − x̂_j · mean(g·x̂))     a sum over the row
//   dγ_j = Σ_rows dy_j · x̂_j,   dβ_j = Σ_rows dy_j       a sum over the column
//
// Version 1 (day04) reads x and dy in two kernels: once for dx, once more for dγ and dβ.
// Here a block walks a strip of rows: for each row it computes dx, and each thread adds dy·x̂
// and dy for the columns it owns to running sums, across all the rows it visits. At the end
// the block's sums go to one row of a small partial buffer, and a second, small kernel adds
// the blocks' rows up per column. x and dy are read from memory once, and nothing is summed
// with atomics: the order of every sum is fixed by the grid, so results repeat bit for bit on
// the same GPU.
//
// Where each thing lives decides the speed. A thread holds its 16 columns of x and dy in
// registers between the two passes over a row, so memory sees each element once. The running
// sums live in shared memory, in slots of the thread's own (no other thread touches them, so
// no barrier guards them): kept in registers they would cost two fp32 registers a column in
// every dtype, and fewer threads would fit on an SM. At 64 registers a thread, 1024 threads
// per SM keep their loads in flight. Rows are split as in the forward's version 4 (plan_rows);
// a block holds as many rows as fit in 512 threads, and their sums meet at the end. A 16-bit
// row of over 8192 columns would need over 512 threads, one block to an SM, idle while it
// waits on its row sums: there a thread takes 32 columns (80 registers) and two blocks of up
// to 384 threads share an SM.
//
// Rows longer than a block can hold are split over several blocks side by side (plan_split_rows),
// each holding its chunk of x and dy in registers and keeping the running sums of its own
// columns. The chunks meet once per row in global memory (row_math.cuh) to add up the row's
// two sums; the blocks of one group of rows write one row of partials between them.
#include <type_traits>
#include <utility>

#include "row_math.cuh"

namespace {

constexpr int kColumnsPerThread = 16;  // x and dy of 16 columns: 32 registers in fp32
constexpr int kMaxThreadsPerRow = 1024;
constexpr int kWideColumnsPerThread = 32;  // 16-bit rows over 8192 columns: see fused_plan
constexpr int kWideMaxThreads = 384;
constexpr int kBlockThreads = 512;     // short rows share a block of up to 512 threads
constexpr int kSplitThreads = 512;     // a split row's blocks: fewer chunks wait on each other than at 256
constexpr int kSumColumns = 32;        // stage 2: a block adds the partials of 32 columns ...
constexpr int kSumLanes = 32;          // ... with 32 threads per column

// a and b summed over each aligned group of `width` lanes (a power of two up to kLargest) by
// xor-shuffles. Unrolled, offsets at or past the width skipped: a loop's counter and branch
// would cost as much as its shuffles, and this runs once a row in every thread.
template <int kLargest, typename acc_t>
__device__ __forceinline__ void lanes_sum2(acc_t& a, acc_t& b, int width) {
#pragma unroll
  for (int offset = kLargest / 2; offset > 0; offset /= 2) {
    if (offset < width) {
      a += __shfl_xor_sync(0xffffffffu, a, offset);
      b += __shfl_xor_sync(0xffffffffu, b, offset);
    }
  }
}

// Sums of a and b over the threads of each row (threadIdx.x); every thread of the row
// receives them. Up to a warp per row: xor-shuffles inside the row's lanes. Longer rows: the
// warps' sums meet in shared memory, and each warp adds its row's by shuffles again.
// (row_math.cuh's row_reduce_sum, of one value, takes rows of over 32 threads only one to a
// block; here rows of 64 to 480 threads share blocks.)
template <typename acc_t>
__device__ __forceinline__ void row_reduce_sums(acc_t& a, acc_t& b) {
  lanes_sum2<kWarpSize>(a, b, blockDim.x < kWarpSize ? blockDim.x : kWarpSize);
  if (blockDim.x <= kWarpSize) return;
  __shared__ acc_t warp_sums[kMaxThreadsPerRow / kWarpSize][2];
  const int warps_per_row = blockDim.x / kWarpSize;  // a multiple of 32 threads: plan_rows
  const int warp = (threadIdx.y * blockDim.x + threadIdx.x) / kWarpSize;
  __syncthreads();  // the previous row's sums may still be being read
  if (threadIdx.x % kWarpSize == 0) {
    warp_sums[warp][0] = a;
    warp_sums[warp][1] = b;
  }
  __syncthreads();
  // One warp's sum a lane, added in log2(warps) steps rather than one a warp. Each aligned
  // group of `span` lanes holds them all, so every lane gets the totals.
  const int span = 1 << (32 - __clz(warps_per_row - 1));  // warps_per_row (>= 2) up to a power of two
  const int slot = threadIdx.x % kWarpSize % span;
  a = slot < warps_per_row ? warp_sums[threadIdx.y * warps_per_row + slot][0] : acc_t(0);
  b = slot < warps_per_row ? warp_sums[threadIdx.y * warps_per_row + slot][1] : acc_t(0);
  lanes_sum2<kMaxThreadsPerRow / kWarpSize>(a, b, span);
}

// The running sums in shared memory: a thread owns kSlots columns (slot s = k·kVec + e for
// element e of its k-th vector) and keeps dγ of slot s at accumulator s, dβ at kSlots + s.
// Accumulators go in packs of 4 (one 16-byte access), and pack p of thread t sits at
// p · threads + t: a warp's accesses are consecutive, with no bank conflicts. Rows that are
// not whole vectors (kVec = 1) use packs of 1. The launch passes the size (sums_bytes).
template <int kPack>
__device__ __forceinline__ int sum_index(int accumulator, int threads, int thread) {
  return ((accumulator / kPack) * threads + thread) * kPack + accumulator % kPack;
}

// __launch_bounds__(1024, 1): a block of up to 1024 threads, so at most 64 registers a thread;
// 32 columns a thread: (384, 2), two blocks to an SM, at most 80 registers.
template <typename T, int kVec, int kVecsPerThread>
__global__ void __launch_bounds__(kVec * kVecsPerThread > kColumnsPerThread ? kWideMaxThreads : kMaxThreadsPerRow,
                                                       kVec * kVecsPerThread > kColumnsPerThread ? 2 : 1)
layernorm_backward_fused_kernel(const T* __restrict__ dy, const T* __restrict__ x,
                                const T* __restrict__ gamma, const acc_type_t<T>* __restrict__ mean,
                                const acc_type_t<T>* __restrict__ rstd, T* __restrict__ dx,
                                acc_type_t<T>* __restrict__ partial_dgamma,
                                acc_type_t<T>* __restrict__ partial_dbeta, int64_t rows, int cols, int chunk_vecs,
                                RowExchange exchange) {
  using acc_t = acc_type_t<T>;
  using Vec = AlignedVector<T, kVec>;
  constexpr int kSlots = kVecsPerThread * kVec;
  constexpr int kPack = kVec % 4 == 0 ? 4 : 1;
  using Pack = AlignedVector<acc_t, kPack>;
  extern __shared__ __align__(16) unsigned char sums_memory[];
  acc_t* sums = reinterpret_cast<acc_t*>(sums_memory);
  Pack* packs = reinterpret_cast<Pack*>(sums_memory);
  const int threads = blockDim.x * blockDim.y;
  const int thread = threadIdx.y * blockDim.x + threadIdx.x;
#pragma unroll
  for (int p = 0; p < 2 * kSlots / kPack; ++p) packs[p * threads + thread] = Pack{};

  // A split row: block b is chunk b % chunks of group b / chunks (else chunks == 1).
  const int chunk = blockIdx.x % exchange.chunks;
  const int64_t group = blockIdx.x / exchange.chunks;
  const int first_vec = chunk * chunk_vecs;
  const int vecs = min(chunk_vecs, cols / kVec - first_vec);  // this block's part of the row
  const Vec* gamma_vecs = reinterpret_cast<const Vec*>(gamma) + first_vec;
  const int64_t row_step = static_cast<int64_t>(gridDim.x / exchange.chunks) * blockDim.y;
  const acc_t inv_cols = acc_t(1) / cols;  // one division, not two a row
  for (int64_t first_row = group * blockDim.y; first_row < rows; first_row += row_step) {
    const int64_t row = first_row + threadIdx.y;
    const bool active = row < rows;  // an idle thread stays for the row sums, adding zeros
    const Vec* x_row = reinterpret_cast<const Vec*>(x + row * cols) + first_vec;
    const Vec* dy_row = reinterpret_cast<const Vec*>(dy + row * cols) + first_vec;
    Vec* dx_row = reinterpret_cast<Vec*>(dx + row * cols) + first_vec;
    const acc_t row_mean = active ? mean[row] : acc_t(0);
    const acc_t row_rstd = active ? rstd[row] : acc_t(0);

    // Every load of the row is issued before any sum needs one, and x and dy stay in
    // registers for the second pass: memory sees each element once, and many loads wait at once.
    Vec x_held[kVecsPerThread];
    Vec dy_held[kVecsPerThread];
#pragma unroll
    for (int k = 0; k < kVecsPerThread; ++k) {
      const int v = k * blockDim.x + threadIdx.x;
      if (active && v < vecs) {
        x_held[k] = x_row[v];
        dy_held[k] = dy_row[v];
      }
    }

    acc_t sum_g = 0;
    acc_t sum_g_xhat = 0;
#pragma unroll
    for (int k = 0; k < kVecsPerThread; ++k) {
      const int v = k * blockDim.x + threadIdx.x;
      if (active && v < vecs) {
        const Vec gv = gamma_vecs[v];  // the same for every row: from L1
#pragma unroll
        for (int p = 0; p < kVec / kPack; ++p) {  // the packs of this vector's slots
          Pack& dgamma = packs[((k * kVec) / kPack + p) * threads + thread];
          Pack& dbeta = packs[((kSlots + k * kVec) / kPack + p) * threads + thread];
          Pack dgamma_sums = dgamma;
          Pack dbeta_sums = dbeta;
#pragma unroll
          for (int i = 0; i < kPack; ++i) {
            const int e = p * kPack + i;
            const acc_t xhat = (widen_at(x_held[k], e) - row_mean) * row_rstd;
            const acc_t d = widen_at(dy_held[k], e);
            const acc_t g = d * widen_at(gv, e);
            sum_g += g;
            sum_g_xhat += g * xhat;
            dgamma_sums.val[i] += d * xhat;
            dbeta_sums.val[i] += d;
          }
          dgamma = dgamma_sums;
          dbeta = dbeta_sums;
        }
      }
    }
    row_reduce_sums(sum_g, sum_g_xhat);
    if (exchange.chunks > 1) {  // acc_t is float: float64 never splits
      const float2* parts = exchange_partials(exchange, row, chunk, sum_g, sum_g_xhat);
      sum_g = 0;
      sum_g_xhat = 0;
      for (int c = 0; c < exchange.chunks; ++c) {
        sum_g += parts[c].x;
        sum_g_xhat += parts[c].y;
      }
    }
    // dx_j = rstd·g_j + slope·(x_j − mean) + offset, with slope = −rstd²·mean(g·x̂) and
    // offset = −rstd·mean(g): the formula above, with two multiply-adds an element. (x − mean
    // first, as in x̂: where |mean| >> std, slope·x + (offset − slope·mean) would cancel.)
    const acc_t slope = -row_rstd * row_rstd * (sum_g_xhat * inv_cols);
    const acc_t offset = -row_rstd * (sum_g * inv_cols);

#pragma unroll
    for (int k = 0; k < kVecsPerThread; ++k) {
      const int v = k * blockDim.x + threadIdx.x;
      if (active && v < vecs) {
        const Vec gv = gamma_vecs[v];
        Vec out;
#pragma unroll
        for (int e = 0; e < kVec; ++e) {
          const acc_t g = widen_at(dy_held[k], e) * widen_at(gv, e);
          out.val[e] = from_acc<T>(row_rstd * g + (slope * (widen_at(x_held[k], e) - row_mean) + offset));
        }
        dx_row[v] = out;
      }
    }
  }

  // The block's row of partials (a split row's block: its part of its group's row). Column c of
  // the part is element c % kVec of vector v = c / kVec, which thread v % blockDim.x of each
  // row group y holds as its slot (v / blockDim.x)·kVec + c % kVec; the groups are added in the
  // order of y.
  __syncthreads();
  const int64_t partial_row = group * cols + first_vec * kVec;
  for (int col = thread; col < vecs * kVec; col += threads) {
    const int v = col / kVec;
    const int slot = (v / blockDim.x) * kVec + col % kVec;
    acc_t dgamma_sum = 0;
    acc_t dbeta_sum = 0;
    for (int y = 0; y < blockDim.y; ++y) {
      const int owner = y * blockDim.x + v % blockDim.x;
      dgamma_sum += sums[sum_index<kPack>(slot, threads, owner)];
      dbeta_sum += sums[sum_index<kPack>(kSlots + slot, threads, owner)];
    }
    partial_dgamma[partial_row + col] = dgamma_sum;
    partial_dbeta[partial_row + col] = dbeta_sum;
  }
}

// Stage 2: block b adds up the partial rows of columns 32b .. 32b + 31. Thread (c, lane) sums
// rows lane, lane + 32, ...; the 32 lanes then meet in shared memory, always in the same order.
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
using FusedKernel = decltype(&layernorm_backward_fused_kernel<T, 1, 1>);

// The instance for vecs_per_thread: plan_rows asks for a power of two up to kColumnsPerThread
// columns (every instance has the same parameters).
template <typename T, int kVec, int kVecs>
FusedKernel<T> fused_instance(int vecs_per_thread) {
  if constexpr (kVecs * kVec > (sizeof(T) == 2 ? kWideColumnsPerThread : kColumnsPerThread)) {
    return nullptr;
  } else {
    if (vecs_per_thread == kVecs) return &layernorm_backward_fused_kernel<T, kVec, kVecs>;
    return fused_instance<T, kVec, kVecs * 2>(vecs_per_thread);
  }
}

template <typename T>
FusedKernel<T> fused_kernel_for(const RowPlan& plan) {
  if (plan.vec == 1) return &layernorm_backward_fused_kernel<T, 1, 1>;
  return fused_instance<T, kVectorBytes / sizeof(T), 1>(plan.vecs_per_thread);
}

// Bytes of running sums a block keeps in shared memory: two per column of each of its rows.
template <typename T>
int sums_bytes(const RowPlan& plan) {
  return 2 * plan.threads_per_row * plan.rows_per_block * plan.vecs_per_thread * plan.vec *
         static_cast<int>(sizeof(acc_type_t<T>));
}

// plan_rows' split, with short rows sharing a block of up to kBlockThreads threads, fewer
// where this GPU's shared memory cannot hold their sums. Rows one block cannot take (longer
// than 16384, or on a T4 over 7680, whose sums outgrow its shared memory) are split over
// several blocks. launchable is false where version 1 must take the row.
template <typename T>
struct FusedPlan {
  RowPlan rows;
  FusedKernel<T> kernel = nullptr;
  bool launchable = false;
};

// The kernel instance for a split of the row, launchable where this GPU's shared memory holds
// its sums (halving the rows a block shares until it does).
template <typename T>
FusedPlan<T> with_kernel(const RowPlan& rows) {
  FusedPlan<T> plan;
  plan.rows = rows;
  if (!rows.fits()) return plan;
  plan.kernel = fused_kernel_for<T>(plan.rows);
  if (plan.kernel == nullptr) return plan;
  const int room = room_for_shared(plan.kernel);
  while (plan.rows.rows_per_block > 1 && sums_bytes<T>(plan.rows) > room) plan.rows.rows_per_block /= 2;
  const int bytes = sums_bytes<T>(plan.rows);
  plan.launchable = bytes <= room;
  return plan;
}

template <typename T>
FusedPlan<T> fused_plan(int64_t cols, bool aligned) {
  constexpr int kVecs = kColumnsPerThread * sizeof(T) / kVectorBytes;
  RowPlan rows = plan_rows(cols, sizeof(T), aligned, kVecs, kVecs, kMaxThreadsPerRow);
  if (rows.fits()) {
    if (rows.threads_per_row < kBlockThreads) {
      rows.rows_per_block = kBlockThreads / rows.threads_per_row;  // fewer blocks: fewer partial rows
    } else if (sizeof(T) == 2 && rows.threads_per_row > kBlockThreads) {
      // A 16-bit row of over 8192 columns needs over 512 threads at 16 columns a thread, and at
      // 64 registers an SM holds one such block, idle while the block waits on its row sums.
      // At 32 columns a thread (80 registers), blocks of up to 384 threads fit two to an SM.
      const RowPlan wide = plan_rows(cols, sizeof(T), aligned, 2 * kVecs, 2 * kVecs, kWideMaxThreads);
      if (wide.fits()) rows = wide;
    }
    const FusedPlan<T> plan = with_kernel<T>(rows);
    if (plan.launchable) return plan;
  }
  if (!split_launch_supported()) return {};
  // Split: blocks of kSplitThreads, or fewer threads where their sums outgrow shared memory (a T4).
  FusedPlan<T> split;
  for (int threads = kSplitThreads; threads >= kWarpSize && !split.launchable; threads /= 2) {
    split = with_kernel<T>(plan_split_rows(cols, sizeof(T), aligned, kVecs, threads));
  }
  return split;
}

// The plan, and `groups`: as many blocks (groups of blocks, for a split row) as fit on the GPU
// at once, so that each partial row sums many rows. Both depend only on the GPU and the row,
// so the order of every sum does too, and each GPU and row length is planned once
// (asked_once: asking the driver costs as much host time as a small call). A split row's
// groups must all fit at once, since they wait on each other: where none fit, no launch.
template <typename T>
struct FusedLaunch {
  FusedPlan<T> plan;
  int64_t groups = 0;
};

template <typename T>
FusedLaunch<T> planned_launch(int64_t cols, bool aligned) {
  return asked_once(std::make_pair(cols, aligned), [&] {
    FusedLaunch<T> launch{fused_plan<T>(cols, aligned)};
    if (launch.plan.launchable) {
      const RowPlan& rows = launch.plan.rows;
      const int64_t at_once = blocks_at_once(launch.plan.kernel, rows.threads_per_row * rows.rows_per_block,
                                             sums_bytes<T>(rows));
      launch.groups = rows.chunks > 1 ? at_once / rows.chunks : (at_once > 0 ? at_once : 1);
      launch.plan.launchable = launch.groups > 0;
    }
    return launch;
  });
}

}  // namespace

template <typename T>
int64_t layernorm_backward_fused_blocks(int64_t rows, int64_t cols, bool aligned) {
  if constexpr (std::is_same_v<T, double>) {
    return 0;  // float64 is for gradcheck, not for speed: version 1 takes it
  } else {
    const FusedLaunch<T> launch = planned_launch<T>(cols, aligned);
    if (rows == 0 || !launch.plan.launchable) return 0;
    const int64_t needed = (rows + launch.plan.rows.rows_per_block - 1) / launch.plan.rows.rows_per_block;
    return needed < launch.groups ? needed : launch.groups;
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
    const FusedPlan<T> plan = planned_launch<T>(cols, aligned).plan;
    acc_type_t<T>* partial_dgamma = partials;
    acc_type_t<T>* partial_dbeta = partials + blocks * cols;
    const dim3 threads(plan.rows.threads_per_row, plan.rows.rows_per_block);
    cudaError_t error = cudaSuccess;
    if (plan.rows.chunks == 1) {
      plan.kernel<<<static_cast<int>(blocks), threads, sums_bytes<T>(plan.rows), stream>>>(
          dy, x, gamma, mean, rstd, dx, partial_dgamma, partial_dbeta, rows, static_cast<int>(cols),
          static_cast<int>(cols / plan.rows.vec), RowExchange{});
      error = cudaGetLastError();
    } else {
      RowExchange exchange;
      error = open_exchange(exchange, rows, plan.rows.chunks, stream);
      if (error != cudaSuccess) return error;
      error = launch_cooperative(plan.kernel, static_cast<int>(blocks * plan.rows.chunks), threads,
                                 sums_bytes<T>(plan.rows), stream, dy, x, gamma, mean, rstd, dx, partial_dgamma,
                                 partial_dbeta, rows, static_cast<int>(cols), plan.rows.chunk_vecs, exchange);
      const cudaError_t freed = close_exchange(exchange, stream);
      if (error == cudaSuccess) error = freed;
    }
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

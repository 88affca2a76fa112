// Fused bias + GELU, forward: y = gelu(x + bias) in one pass over memory.
//
// PyTorch's F.gelu(x + bias) is two kernels: the add reads x and writes x + bias, then the GELU
// reads that back and writes y. Four passes over a tensor the size of x; this kernel makes two
// (read x, write y), so at the same bandwidth it takes half the time.
//
// A thread owns one vector column, kVec neighbouring elements of a row (16 bytes: one load
// instruction), and walks down the rows a grid's height apart. Its kVec bias values are the
// same in every row, so it loads them once and keeps them in registers, in the op-math type.
// kVec = 1 is the scalar path, the same code an element at a time: the launcher takes it for
// float64 and where rows are not whole 16-byte vectors at 16-byte addresses (see vector_width
// and whole_vectors in bias_gelu.h), because a 16-byte access at an address that is not a
// multiple of 16 is not slow, it is an error ("misaligned address") that loses the CUDA context.
#include "course_todo.h"
#include "vectors.cuh"

namespace {

// BEGIN SOLUTION
constexpr int kBlockThreads = 256;
// Rows past gridDim.y * blockDim.y are taken by the same threads, their bias already loaded.
// Each thread takes at least kMinRowsPerThread rows, so that its fixed costs (the bias
// vector, the indices, its block's launch) are shared; 1024 block rows are enough blocks to
// fill any GPU several times over.
constexpr int64_t kMinRowsPerThread = 2;
constexpr int64_t kMaxGridRows = 1024;

// STUB
COURSE_TODO("day06: bias_gelu_forward.cu, bias_gelu_forward_kernel: y = gelu(x + bias) a vector at a time, each thread's bias loaded once, with a launch of your design that covers every element, then delete this line");
// END SOLUTION
// x, y: [rows, vecs] vectors of kVec elements; bias: [vecs] vectors.
template <typename T, int kVec, GeluForm kForm>
// BEGIN SOLUTION
__global__ void __launch_bounds__(kBlockThreads)
// STUB
// TODO(day06): __launch_bounds__(your block's threads) here tells nvcc how many registers a thread may use
__global__ void
// END SOLUTION
bias_gelu_forward_kernel(const T* __restrict__ x, const T* __restrict__ bias, T* __restrict__ y, int64_t rows,
                         int vecs) {
  using acc_t = acc_type_t<T>;
  using Vec = AlignedVector<T, kVec>;
  // BEGIN SOLUTION
  const int v = blockIdx.x * blockDim.x + threadIdx.x;  // this thread's vector column
  if (v >= vecs) return;  // the last block column sticks out past the row
  // STUB
  // TODO(day06): which vector column, and below which rows, this thread takes: yours to decide,
  // with the launch in launch_forward.
  // END SOLUTION
  const Vec* x_vecs = reinterpret_cast<const Vec*>(x);
  const Vec* bias_vecs = reinterpret_cast<const Vec*>(bias);
  Vec* y_vecs = reinterpret_cast<Vec*>(y);
  // BEGIN SOLUTION
  const int64_t row_step = static_cast<int64_t>(gridDim.y) * blockDim.y;
  const Vec bias_in = bias_vecs[v];
  acc_t b[kVec];
#pragma unroll
  for (int e = 0; e < kVec; ++e) b[e] = to_acc(bias_in.val[e]);

  for (int64_t row = static_cast<int64_t>(blockIdx.y) * blockDim.y + threadIdx.y; row < rows; row += row_step) {
    const Vec x_in = x_vecs[row * vecs + v];
    Vec out;
#pragma unroll
    for (int e = 0; e < kVec; ++e) out.val[e] = from_acc<T>(gelu<kForm>(to_acc(x_in.val[e]) + b[e]));
    y_vecs[row * vecs + v] = out;
  }
  // STUB
  // TODO(day06): y = gelu<kForm>(x + bias) for every element this thread owns, reading x and
  // writing y a Vec at a time (one 16-byte access each), with x_vecs[row * vecs + v] the vector
  // v of row `row`. What must hold:
  //   - every element of every row is written exactly once, whatever grid launch_forward starts:
  //     if the grid covers fewer rows than there are, a thread goes on to further rows;
  //   - a thread's bias vector is the same in every row: load and widen it once, not per row;
  //   - neighbouring threads of a warp touch neighbouring vectors of a row (coalesced);
  //   - everything between the load and the store runs in acc_t; from_acc rounds once, at the end.
  // END SOLUTION
}

template <typename T, int kVec>
cudaError_t launch_forward(const T* x, const T* bias, T* y, int64_t rows, int64_t cols, GeluForm form,
                           cudaStream_t stream) {
  // BEGIN SOLUTION
  const int vecs = static_cast<int>(cols / kVec);
  const dim3 block = block_over_columns(vecs, kBlockThreads);
  const int64_t block_rows = (rows + block.y - 1) / block.y;
  const int64_t wanted_rows = (block_rows + kMinRowsPerThread - 1) / kMinRowsPerThread;
  const int64_t grid_rows = wanted_rows < kMaxGridRows ? wanted_rows : kMaxGridRows;
  const dim3 grid((vecs + block.x - 1) / block.x, static_cast<unsigned>(grid_rows));
  if (form == GeluForm::kTanh) {
    bias_gelu_forward_kernel<T, kVec, GeluForm::kTanh><<<grid, block, 0, stream>>>(x, bias, y, rows, vecs);
  } else {
    bias_gelu_forward_kernel<T, kVec, GeluForm::kErf><<<grid, block, 0, stream>>>(x, bias, y, rows, vecs);
  }
  return cudaGetLastError();
  // STUB
  // TODO(day06): launch bias_gelu_forward_kernel<T, kVec, form> on `stream` (one instance for
  // each form), with the block and grid your kernel expects, and return cudaGetLastError().
  // Yours to decide: the block's shape and size (at most 1024 threads, and the __launch_bounds__
  // you give the kernel), and how many rows the grid covers before threads loop. What must
  // hold: vecs = cols / kVec vector columns and `rows` rows all covered, for any rows >= 1 and
  // 1 <= cols < 2^31; gridDim.y and gridDim.z are at most 65535 (gridDim.x up to 2^31 - 1).
  // The perf cases time this launch on a large [rows, cols] in fp32 and bf16.
  return cudaErrorNotYetImplemented;
  // END SOLUTION
}

}  // namespace

template <typename T>
cudaError_t launch_bias_gelu_forward(const T* x, const T* bias, T* y, int64_t rows, int64_t cols, GeluForm form,
                                     cudaStream_t stream) {
  constexpr int kVec = vector_width<T>();
  if (kVec > 1 && whole_vectors(cols, kVec, {x, bias, y})) {
    return launch_forward<T, kVec>(x, bias, y, rows, cols, form, stream);
  }
  return launch_forward<T, 1>(x, bias, y, rows, cols, form, stream);
}

#define INSTANTIATE_LAUNCH_BIAS_GELU_FORWARD(T) \
  template cudaError_t launch_bias_gelu_forward<T>(const T*, const T*, T*, int64_t, int64_t, GeluForm, cudaStream_t);
INSTANTIATE_LAUNCH_BIAS_GELU_FORWARD(__half)
INSTANTIATE_LAUNCH_BIAS_GELU_FORWARD(__nv_bfloat16)
INSTANTIATE_LAUNCH_BIAS_GELU_FORWARD(float)
INSTANTIATE_LAUNCH_BIAS_GELU_FORWARD(double)

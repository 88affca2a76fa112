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

constexpr int kBlockThreads = 256;
// Rows past gridDim.y * blockDim.y are taken by the same threads, their bias already loaded.
// Each thread takes at least kMinRowsPerThread rows, so that its fixed costs (the bias
// vector, the indices, its block's launch) are shared; 1024 block rows are enough blocks to
// fill any GPU several times over.
constexpr int64_t kMinRowsPerThread = 2;
constexpr int64_t kMaxGridRows = 1024;

// BEGIN SOLUTION
// STUB
COURSE_TODO("day06: bias_gelu_forward.cu, bias_gelu_forward_kernel: load this thread's bias vector once, then for each of its rows read a Vec of x and write gelu<kForm>(x + bias) as a Vec of y, then delete this line");
// END SOLUTION
// x, y: [rows, vecs] vectors of kVec elements; bias: [vecs] vectors.
template <typename T, int kVec, GeluForm kForm>
__global__ void __launch_bounds__(kBlockThreads)
bias_gelu_forward_kernel(const T* __restrict__ x, const T* __restrict__ bias, T* __restrict__ y, int64_t rows,
                         int vecs) {
  using acc_t = acc_type_t<T>;
  using Vec = AlignedVector<T, kVec>;
  const int v = blockIdx.x * blockDim.x + threadIdx.x;  // this thread's vector column
  if (v >= vecs) return;  // the last block column sticks out past the row
  const Vec* x_vecs = reinterpret_cast<const Vec*>(x);
  const Vec* bias_vecs = reinterpret_cast<const Vec*>(bias);
  Vec* y_vecs = reinterpret_cast<Vec*>(y);
  const int64_t row_step = static_cast<int64_t>(gridDim.y) * blockDim.y;
  // BEGIN SOLUTION
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
  // TODO(day06): the bias first: const Vec bias_in = bias_vecs[v], widened once into
  // acc_t b[kVec] (b[e] = to_acc(bias_in.val[e])). Then for row = blockIdx.y * blockDim.y +
  // threadIdx.y while row < rows, stepping by row_step: read const Vec x_in = x_vecs[row * vecs + v]
  // (one 16-byte load), fill a Vec out with out.val[e] = from_acc<T>(gelu<kForm>(to_acc(x_in.val[e]) + b[e])),
  // and store it with one y_vecs[row * vecs + v] = out. Everything between the load and the
  // store runs in acc_t: from_acc rounds once, at the end.
  // END SOLUTION
}

template <typename T, int kVec>
cudaError_t launch_forward(const T* x, const T* bias, T* y, int64_t rows, int64_t cols, GeluForm form,
                           cudaStream_t stream) {
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

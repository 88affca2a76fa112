// The fused bias + GELU launchers, and what bias_gelu.cpp and both .cu files share. Plain
// pointers, sizes and a stream, no torch headers: each .cu rebuilds on its own in seconds.
//
//   launch_bias_gelu_forward    y = gelu(x + bias)                              bias_gelu_forward.cu
//   launch_bias_gelu_backward   dx = dy · gelu'(x + bias), dbias = Σ_rows dx     bias_gelu_backward.cu
//
// Every launcher reads x, y, dy and dx as [rows, cols] row-major and bias and dbias as [cols];
// launches on `stream`; and returns the launch error (cudaSuccess when none). The caller
// launches nothing for an empty tensor: rows >= 1 and 1 <= cols < 2^31.
#pragma once

#include <cstdint>
#include <initializer_list>

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include "acc_type.h"
#include "gelu_math.h"

// The type GELU is computed in: float for the 16-bit types (erf of a 16-bit argument, or a sum
// of many 16-bit terms, would lose most of their bits), which round once, at the store.

constexpr int kVectorBytes = 16;  // the widest load one thread can issue: ld.global.v4.b32

// Elements a thread loads at once: a 16-byte vector of 4 floats or 8 halves. float64 is for
// gradcheck, not for speed, and takes the scalar path: double erf and exp call out-of-line slow
// paths, and two elements' worth of them side by side spill registers.
template <typename T>
constexpr int vector_width() {
  return sizeof(T) == 8 ? 1 : kVectorBytes / static_cast<int>(sizeof(T));
}

// Whether rows of `cols` elements at these addresses can be read and written as whole 16-byte
// vectors of `vec` elements. Row r starts r·cols elements after the first, so every row starts
// on a 16-byte boundary only if cols is a multiple of vec and every pointer is 16-byte aligned.
// torch.empty's memory is; a view such as x[1:] or x[:, 1:] need not be.
inline bool whole_vectors(int64_t cols, int vec, std::initializer_list<const void*> pointers) {
  if (cols % vec != 0) return false;
  for (const void* pointer : pointers) {
    if (reinterpret_cast<std::uintptr_t>(pointer) % kVectorBytes != 0) return false;
  }
  return true;
}

template <typename T>
cudaError_t launch_bias_gelu_forward(const T* x, const T* bias, T* y, int64_t rows, int64_t cols, GeluForm form,
                                     cudaStream_t stream);

// The backward sums dx over the rows in two stages: each strip of rows into its own row of
// partial sums, then the strips per column. This says how many strips it cuts these rows into
// on the current GPU (the same answer for the same shape, pointers' alignment and GPU), so the
// caller can allocate `partials`: strips * cols elements of acc_type_t<T>.
template <typename T>
int64_t bias_gelu_backward_strips(const T* dy, const T* x, const T* bias, const T* dx, int64_t rows, int64_t cols,
                                  GeluForm form);

template <typename T>
cudaError_t launch_bias_gelu_backward(const T* dy, const T* x, const T* bias, T* dx, acc_type_t<T>* partials,
                                      T* dbias, int64_t rows, int64_t cols, GeluForm form, cudaStream_t stream);

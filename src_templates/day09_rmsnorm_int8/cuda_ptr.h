// A tensor's data as the pointer a kernel takes: cuda_ptr<scalar_t>(t).
//
// at::Half and at::BFloat16 are PyTorch's names for the bits CUDA calls __half and
// __nv_bfloat16: the same size and layout, so a pointer to one may be read as the other.
// Inside AT_DISPATCH_..., cuda_ptr<scalar_t>(t) is a float*, double*, __half* or
// __nv_bfloat16*, and CudaType<scalar_t>::type names that element type.
#pragma once

#include <ATen/ATen.h>
#include <cuda_bf16.h>
#include <cuda_fp16.h>

// Internal to each file that includes it, as a unit's own helpers are: no two loaded
// extensions share these symbols.
namespace {

template <typename T>
struct CudaType { using type = T; };
template <>
struct CudaType<at::Half> { using type = __half; };
template <>
struct CudaType<at::BFloat16> { using type = __nv_bfloat16; };

template <typename T>
typename CudaType<T>::type* cuda_ptr(const at::Tensor& t) {
  return reinterpret_cast<typename CudaType<T>::type*>(t.data_ptr<T>());
}

// An optional input's pointer: nullptr where the tensor is absent (undefined), which a
// launcher reads as "none" (no weight, no residual).
template <typename T>
typename CudaType<T>::type* cuda_ptr_or_null(const at::Tensor& t) {
  return t.defined() ? cuda_ptr<T>(t) : nullptr;
}

}  // namespace

// A backward node written by hand, as PyTorch's generated code writes one for each of its own
// operators. A torch::autograd::Function does the same job with bookkeeping of its own on
// every call (its context, its outputs' wrapping and checks); a node does only what its
// operator needs, and costs the host less (docs/performance.md, "day07 at 4096×1024").
//
// The price: the headers under torch/csrc are not a stable API. Nodes are held by
// std::shared_ptr in older torch and by c10::intrusive_ptr in newer; Tensor::grad_fn() says
// which, and make_node<T>() makes one the way this torch holds it.
#pragma once

#include <ATen/ATen.h>
#include <torch/csrc/autograd/function.h>
#include <torch/csrc/autograd/functions/utils.h>

#include <memory>
#include <type_traits>
#include <utility>

namespace course {

using NodePtr = std::decay_t<decltype(std::declval<const at::Tensor&>().grad_fn())>;

template <typename T>
auto make_node() {
  if constexpr (std::is_same_v<NodePtr, std::shared_ptr<torch::autograd::Node>>) {
    return std::make_shared<T>();
  } else {
    return c10::make_intrusive<T>();
  }
}

}  // namespace course

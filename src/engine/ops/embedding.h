// Embedding gather: out[i, :] = table[ids[i], :].
//   table [V, D] (any float dtype), ids i32 [N] (or any shape: flattened), out [N, D]
//   (or ids.shape + [D]) with table's dtype. An id outside [0, V) is an invalid_argument
//   error on the CPU; on CUDA it is checked before launch when ids live on the host.
#pragma once

#include "engine/tensor.h"

namespace parley {

void embedding(const Tensor& table, const Tensor& ids, Tensor& out);

namespace cpu {
void embedding(const Tensor& table, const Tensor& ids, Tensor& out);
}
namespace cuda {
void embedding(const Tensor& table, const Tensor& ids, Tensor& out);
}

}  // namespace parley

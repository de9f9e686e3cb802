// Embedding gather: out[i, :] = table[ids[i], :].
//   table [V, D] (any float dtype), ids i32 [N] (or any shape: flattened), out [N, D]
//   (or ids.shape + [D]) with table's dtype. An id outside [0, V) is an invalid_argument
//   error on the CPU; on CUDA it is checked before launch when ids live on the host.
// add (optional): out[i, :] = table[ids[i], :] + add[i, :] with add [N, D] (or ids.shape +
//   [D]), or + add[:] with add [D]; table's dtype, computed in f32 and rounded once, as
//   ops/elementwise.h's add gives it (a decoder's token and positional embeddings: on CUDA
//   one launch instead of two).
#pragma once

#include "engine/tensor.h"

namespace parley {

void embedding(const Tensor& table, const Tensor& ids, Tensor& out, const Tensor* add = nullptr);

namespace cpu {
void embedding(const Tensor& table, const Tensor& ids, Tensor& out);
}
namespace cuda {
void embedding(const Tensor& table, const Tensor& ids, Tensor& out, const Tensor* add);
}

}  // namespace parley

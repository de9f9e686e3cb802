// Row scatter, the inverse of the embedding gather: out[ids[i], :] = src[i, :].
//   src [N, D] (any dtype), ids i32 [N] (distinct: not checked; on the host or out's
//   device), out [R, D]
//   with src's dtype; rows of out not named in ids are left as they are. An id outside
//   [0, R) is an invalid_argument error when ids live on the host; on CUDA a device id out of
//   range is skipped. Used to append one position per sequence to head-major KV caches (a
//   batch of sequences at different positions) in one call.
#pragma once

#include "engine/tensor.h"

namespace parley {

void scatter_rows(const Tensor& src, const Tensor& ids, Tensor& out);

namespace cpu {
void scatter_rows(const Tensor& src, const Tensor& ids, Tensor& out);
}
namespace cuda {
void scatter_rows(const Tensor& src, const Tensor& ids, Tensor& out);
}

}  // namespace parley

// softmax / log_softmax over the last dimension of x [.., N]; out has x's shape and
// dtype (f32, f16, bf16; computed in f32 with the row max subtracted). -inf entries
// give 0 (softmax) / -inf (log_softmax); a row of all -inf gives NaN, as PyTorch.
#pragma once

#include "engine/tensor.h"

namespace parley {

void softmax(const Tensor& x, Tensor& out);
void log_softmax(const Tensor& x, Tensor& out);

namespace cpu {
void softmax(const Tensor& x, Tensor& out, bool log);
}
namespace cuda {
void softmax(const Tensor& x, Tensor& out, bool log);
}

}  // namespace parley

// Gated linear unit activations of chat-model MLPs: out = act(gate) * up, element-wise.
//   silu:      x / (1 + exp(-x))                                 (SwiGLU: Llama, Qwen)
//   gelu_tanh: 0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3)))   (GeGLU: Gemma,
//              PyTorch's gelu(approximate="tanh"), mlx's gelu_approx)
// gate, up, out: the same shape and dtype (f32 on the CPU; f32, f16 or bf16 on CUDA, computed
// in f32). out may alias gate or up.
#pragma once

#include "engine/tensor.h"

namespace parley {

enum class GluActivation { silu, gelu_tanh };

void glu(const Tensor& gate, const Tensor& up, GluActivation act, Tensor& out);

namespace cpu {
void glu(const Tensor& gate, const Tensor& up, GluActivation act, Tensor& out);
}
namespace cuda {
void glu(const Tensor& gate, const Tensor& up, GluActivation act, Tensor& out);
}

}  // namespace parley

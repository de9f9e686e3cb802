// Rotary position embedding (RoPE), the rotate_half form of Llama / Hugging Face: for each
// token t, head h and pair i in [0, D/2), the pair (x[i], x[i + D/2]) is rotated by the
// angle positions[t] * inv_freq[i]:
//   x'[i]       = x[i] cos a - x[i + D/2] sin a
//   x'[i + D/2] = x[i + D/2] cos a + x[i] sin a
//   x [T, H, D] (in place; f32 on the CPU, any float type on CUDA, rotated in f32),
//   positions i32 [T] (any order: ragged rows of a batch),
//   inv_freq f32 [D/2] on x's device.
// Scaling schemes (llama3, linear) only change inv_freq: rope_inv_freq() computes it once
// per model from the config; the op never sees the scheme.
#pragma once

#include <string>
#include <vector>

#include "engine/tensor.h"

namespace parley {

// How a model's RoPE frequencies are derived from base^(-2i/D) (Hugging Face rope_scaling).
struct RopeScaling {
  std::string type = "default";   // default | linear | llama3
  float factor = 1.0f;            // linear: positions / factor; llama3: the long-wave divisor
  float low_freq_factor = 1.0f;   // llama3
  float high_freq_factor = 4.0f;  // llama3
  float original_max_position_embeddings = 8192;  // llama3
};

// inv_freq [D/2] for head dimension `head_dim` and base `theta`. llama3: wavelengths
// 2 pi / f longer than original/low_freq_factor are divided by `factor`, shorter than
// original/high_freq_factor kept, and the band between interpolated smoothly (Llama 3.1's
// published rule). linear: every frequency divided by `factor`. Others: unsupported.
std::vector<float> rope_inv_freq(int head_dim, double theta, const RopeScaling& scaling);

void rope(Tensor& x, const Tensor& positions, const Tensor& inv_freq);

namespace cpu {
void rope(Tensor& x, const Tensor& positions, const Tensor& inv_freq);
}
namespace cuda {
void rope(Tensor& x, const Tensor& positions, const Tensor& inv_freq);
}

}  // namespace parley

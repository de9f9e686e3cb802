// Micro-benchmarks of the CPU ops that are not GEMMs, at Whisper tiny encoder shapes
// (1500 frames x 384 channels): norms, activations, softmax over attention rows.
#include <benchmark/benchmark.h>

#include <random>

#include "engine/ops/elementwise.h"
#include "engine/ops/norm.h"
#include "engine/ops/softmax.h"

namespace parley {
namespace {

Tensor random_f32(const Shape& shape) {
  Tensor t = Tensor::empty(shape, DType::f32);
  std::mt19937 rng(7);
  std::normal_distribution<float> dist;
  for (int64_t i = 0; i < t.numel(); ++i) t.data<float>()[i] = dist(rng);
  return t;
}

void BM_LayerNorm(benchmark::State& state) {
  Tensor x = random_f32({1500, 384}), g = random_f32({384}), b = random_f32({384});
  Tensor out = Tensor::empty(x.shape(), DType::f32);
  for (auto _ : state) layer_norm(x, g, b, 1e-5f, out);
  state.SetBytesProcessed(int64_t(state.iterations()) * int64_t(x.nbytes()) * 2);
}
BENCHMARK(BM_LayerNorm);

void BM_Gelu(benchmark::State& state) {
  Tensor x = random_f32({1500, 1536});
  Tensor out = Tensor::empty(x.shape(), DType::f32);
  for (auto _ : state) gelu(x, out);
  state.SetBytesProcessed(int64_t(state.iterations()) * int64_t(x.nbytes()) * 2);
}
BENCHMARK(BM_Gelu);

void BM_Softmax(benchmark::State& state) {
  Tensor x = random_f32({6 * 64, 1500});  // a slice of the 6 x 1500 x 1500 score rows
  Tensor out = Tensor::empty(x.shape(), DType::f32);
  for (auto _ : state) softmax(x, out);
  state.SetBytesProcessed(int64_t(state.iterations()) * int64_t(x.nbytes()) * 2);
}
BENCHMARK(BM_Softmax);

}  // namespace
}  // namespace parley

// The cuda:: entry points for a build without CUDA (PARLEY_CUDA=OFF): each one throws
// "built without CUDA", so the engine core calls them without #ifdefs (MLX's no_gpu/).
#include <string>

#include "engine/device.h"
#include "engine/error.h"
#include "engine/ops/attention.h"
#include "engine/ops/beam_step.h"
#include "engine/ops/conv.h"
#include "engine/ops/elementwise.h"
#include "engine/ops/embedding.h"
#include "engine/ops/matmul.h"
#include "engine/ops/norm.h"
#include "engine/ops/reduce.h"
#include "engine/ops/scatter_rows.h"
#include "engine/ops/softmax.h"
#include "engine/ops/spectral.h"
#include "engine/ops/timestamp_rule.h"
#include "engine/ops/transpose.h"

namespace parley {

namespace {
[[noreturn]] void no_cuda(const char* op) {
  throw Error(ErrorKind::unsupported, std::string("[") + op + "] parley was built without CUDA");
}
}  // namespace

bool cuda_available() { return false; }

namespace cuda {

void* malloc_device(size_t) { no_cuda("cuda_malloc"); }
void free_device(void*) { no_cuda("cuda_free"); }
void memcpy_h2d(void*, const void*, size_t) { no_cuda("cuda_memcpy"); }
void memcpy_d2h(void*, const void*, size_t) { no_cuda("cuda_memcpy"); }
void memcpy_d2d(void*, const void*, size_t) { no_cuda("cuda_memcpy"); }
void synchronize() { no_cuda("cuda_synchronize"); }
void* malloc_pinned(size_t) { no_cuda("cuda_malloc_pinned"); }
void free_pinned(void*) noexcept {}
void memcpy_d2h_async(void*, const void*, size_t) { no_cuda("cuda_memcpy"); }
Event::Event() { no_cuda("cuda_event"); }
Event::~Event() = default;
void Event::record() { no_cuda("cuda_event"); }
void Event::wait() const { no_cuda("cuda_event"); }
std::string_view device_label() { return "none"; }
std::mutex& exclusive() {
  static std::mutex m;
  return m;
}
class Graph {};
void begin_capture(bool) { no_cuda("cuda_graph"); }
std::shared_ptr<Graph> end_capture() { no_cuda("cuda_graph"); }
void abort_capture() noexcept {}
void launch(const Graph&) { no_cuda("cuda_graph"); }
void reserve_scratch(size_t) { no_cuda("cuda_scratch"); }
uint64_t scratch_generation() { return 0; }

void attention(const Tensor&, const Tensor&, const Tensor&, Tensor&, const AttentionOptions&) {
  no_cuda("attention");
}
bool attention_qkv_fused(const Tensor&, int, const Tensor&, const AttentionOptions&) {
  return false;
}
void attention_qkv(const Tensor&, int, Tensor&, const AttentionOptions&) {
  no_cuda("attention_qkv");
}
void attention_tokens(const TokenHeads&, const TokenHeads&, const TokenHeads&, int64_t, int,
                      Tensor&, const AttentionOptions&) {
  no_cuda("attention_tokens");
}
void conv1d(const Tensor&, const Tensor&, Tensor&, const Conv1dOptions&) { no_cuda("conv1d"); }
void binary(BinaryOp op, const Tensor&, const Tensor&, Tensor&) {
  no_cuda(op == BinaryOp::add ? "add" : "mul");
}
void scale(const Tensor&, float, Tensor&) { no_cuda("scale"); }
void unary(UnaryOp op, const Tensor&, Tensor&) { no_cuda(op == UnaryOp::gelu ? "gelu" : "silu"); }
void convert(const Tensor&, Tensor&) { no_cuda("convert"); }
void embedding(const Tensor&, const Tensor&, Tensor&, const Tensor*) { no_cuda("embedding"); }
void scatter_rows(const Tensor&, const Tensor&, Tensor&) { no_cuda("scatter_rows"); }
void matmul(const Tensor&, const Tensor&, Tensor&, const MatmulOptions&) { no_cuda("matmul"); }
bool matmul_norm_folded(const Tensor&, const Tensor&, Tensor&, const MatmulOptions&) {
  no_cuda("matmul");
}
void layer_norm(const Tensor&, const Tensor&, const Tensor&, float, Tensor&) {
  no_cuda("layer_norm");
}
void rms_norm(const Tensor&, const Tensor&, float, Tensor&) { no_cuda("rms_norm"); }
void argmax(const Tensor&, Tensor&) { no_cuda("argmax"); }
void topk(const Tensor&, int, Tensor&, Tensor&) { no_cuda("topk"); }
void masked_topk(const Tensor&, const Tensor*, const Tensor&, int, Tensor&, Tensor&,
                 const TimestampRuleAdvance*) {
  no_cuda("masked_topk");
}
bool matmul_masked_top1(const Tensor&, const Tensor&, Tensor&, const MatmulOptions&, const Tensor*,
                        const Tensor&, Tensor&, Tensor&, const TimestampRuleAdvance*) {
  no_cuda("matmul_masked_top1");
}
void softmax(const Tensor&, Tensor&, bool log) { no_cuda(log ? "log_softmax" : "softmax"); }
void permute(const Tensor&, const std::vector<int>&, Tensor&) { no_cuda("permute"); }
void stft_frames(const Tensor&, const Tensor&, Tensor&, const StftFramesOptions&) {
  no_cuda("stft_frames");
}
void power_spectrum(const Tensor&, Tensor&) { no_cuda("power_spectrum"); }
void log_mel_columns(const Tensor&, Tensor&, int64_t) { no_cuda("log_mel_columns"); }
void log_mel_normalize(Tensor&) { no_cuda("log_mel_normalize"); }
void copy_columns(const Tensor&, int64_t, int64_t, Tensor&) { no_cuda("copy_columns"); }
void advance_timestamp_rule(const Tensor&, const Tensor&, Tensor&, Tensor&, Tensor&,
                            const TimestampRuleParams&) {
  no_cuda("advance_timestamp_rule");
}
void beam_step(const Tensor&, const Tensor&, const BeamStepIn&, BeamStepOut&,
               const BeamStepParams&) {
  no_cuda("beam_step");
}
void copy_slot_rows(std::span<Tensor>, const Tensor&, const Tensor&, const Tensor&, int64_t) {
  no_cuda("copy_slot_rows");
}

}  // namespace cuda
}  // namespace parley

// The cuda:: entry points of the chat-model ops (rope, paged attention, glu, the fused ops) for a
// build without CUDA: each throws "built without CUDA" (as no_cuda/stubs.cpp).
#include "engine/error.h"
#include "engine/ops/glu.h"
#include "engine/ops/llm_fused.h"
#include "engine/ops/paged_attention.h"
#include "engine/ops/rope.h"

namespace parley::cuda {

namespace {
[[noreturn]] void no_cuda(const char* op) {
  throw Error(ErrorKind::unsupported, std::string("[") + op + "] parley was built without CUDA");
}
}  // namespace

void rope(Tensor&, const Tensor&, const Tensor&) { no_cuda("rope"); }
void paged_attention(const Tensor&, const Tensor&, const Tensor&, std::span<const PagedRow>,
                     Tensor&, const PagedAttentionOptions&) {
  no_cuda("paged_attention");
}
void paged_kv_write(const Tensor&, const Tensor&, const Tensor&, Tensor&, Tensor&) {
  no_cuda("paged_kv_write");
}
void glu(const Tensor&, const Tensor&, GluActivation, Tensor&) { no_cuda("glu"); }
void add_rms_norm(Tensor&, const Tensor&, const Tensor&, float, Tensor&) {
  no_cuda("add_rms_norm");
}
void qkv_rope_write(const Tensor&, const QkvRope&, Tensor&, Tensor&, Tensor&) {
  no_cuda("qkv_rope_write");
}
void glu_halves(const Tensor&, GluActivation, Tensor&) { no_cuda("glu_halves"); }

}  // namespace parley::cuda

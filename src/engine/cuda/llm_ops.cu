// The chat-model ops on CUDA (rope, paged attention, glu): not written yet. Each entry
// throws unsupported so that a CUDA build links and a caller learns what is missing; the
// CPU versions (engine/cpu/) are the oracle these will be tested against.
#include "engine/error.h"
#include "engine/ops/glu.h"
#include "engine/ops/paged_attention.h"
#include "engine/ops/rope.h"

namespace parley::cuda {

namespace {
[[noreturn]] void not_yet(const char* op) {
  throw Error(ErrorKind::unsupported, std::string("[") + op + "] not yet on CUDA");
}
}  // namespace

void rope(Tensor&, const Tensor&, const Tensor&) { not_yet("rope"); }
void paged_attention(const Tensor&, const Tensor&, const Tensor&, std::span<const PagedRow>,
                     Tensor&, const PagedAttentionOptions&) {
  not_yet("paged_attention");
}
void paged_kv_write(const Tensor&, const Tensor&, const Tensor&, Tensor&, Tensor&) {
  not_yet("paged_kv_write");
}
void glu(const Tensor&, const Tensor&, GluActivation, Tensor&) { not_yet("glu"); }

}  // namespace parley::cuda

// WhisperBatchSession's state and its batched encoder call. The decoder side (prefill, step)
// is in batch_decoder.cpp.
#include "whisper/batch_session.h"

#include <algorithm>
#include <cstring>

#include "engine/error.h"
#include "engine/ops/scatter_rows.h"
#include "engine/ops/transpose.h"
#include "whisper/encoder.h"
#include "whisper/model.h"

namespace parley {

WhisperBatchSession::WhisperBatchSession(std::shared_ptr<const WhisperModel> model, int n_slots)
    : model_(std::move(model)),
      n_slots_(n_slots),
      pool_(model_ ? model_->device() : Device::cpu),
      host_pool_(Device::cpu),
      graph_pool_(model_ ? model_->device() : Device::cpu) {
  check_arg(model_ != nullptr, "[whisper] batch session: null model");
  check_arg(n_slots >= 1,
            "[whisper] batch session: n_slots must be >= 1, got " + std::to_string(n_slots));
  const WhisperConfig& c = model_->config();
  const int64_t s = n_slots, h = c.n_text_head, dh = c.n_text_state / h;
  const Device dev = model_->device();
  const DType dt = model_->dtype();
  // The self-attention caches are zeroed, so positions past a slot's cached ones hold finite
  // values (a ragged prefill's padding lands there; no step reads past its key_len). A
  // slot's cross K/V is written by encode before anything reads it.
  cache_.resize(size_t(c.n_text_layer));
  for (LayerCache& l : cache_) {
    l.self_k = Tensor::zeros({s, h, c.n_text_ctx, dh}, dt, dev);
    l.self_v = Tensor::zeros({s, h, c.n_text_ctx, dh}, dt, dev);
    l.cross_kv = Tensor::empty({2, s, h, c.n_audio_ctx, dh}, dt, dev);
  }
  audio_len_.assign(size_t(n_slots), 0);
  n_cached_.assign(size_t(n_slots), 0);
  step_ids_.reserve(size_t(n_slots) * size_t(5 + c.n_text_head));
  if (dev == Device::cuda) {
    graph_input_ = Tensor::zeros({s * (5 + h)}, DType::i32, dev);
    graph_logits_ = Tensor::empty({s, c.n_vocab}, DType::f32, dev);
  }
}

void WhisperBatchSession::check_slot(int slot, const char* where) const {
  check_arg(slot >= 0 && slot < n_slots_, std::string("[whisper] batch ") + where + ": slot " +
                                              std::to_string(slot) + " outside [0, " +
                                              std::to_string(n_slots_) + ")");
}

int WhisperBatchSession::n_cached(int slot) const {
  check_slot(slot, "n_cached");
  return n_cached_[size_t(slot)];
}

int WhisperBatchSession::audio_ctx(int slot) const {
  check_slot(slot, "audio_ctx");
  return audio_len_[size_t(slot)];
}

void WhisperBatchSession::reset(int slot) {
  check_slot(slot, "reset");
  n_cached_[size_t(slot)] = 0;
}

void WhisperBatchSession::write_positions(Tensor& cache, int slot, int64_t pos,
                                          const Tensor& src_heads) {
  // cache [S, H, n_ctx, dh]; src_heads [H, T, dh]: one contiguous copy per head.
  const int64_t h = cache.dim(1), n_ctx = cache.dim(2), dh = cache.dim(3);
  const int64_t t = src_heads.dim(1);
  const Tensor rows = cache.reshape({cache.dim(0) * h * n_ctx, dh});
  for (int64_t i = 0; i < h; ++i) {
    const int64_t at = (int64_t(slot) * h + i) * n_ctx + pos;
    Tensor dst = rows.slice0(at, at + t);
    dst.copy_from(src_heads.slice0(i, i + 1).reshape({t, dh}));
  }
}

void WhisperBatchSession::encode(std::span<const int32_t> slots, const Tensor& mels,
                                 int64_t n_ctx) {
  using namespace whisper;
  g_encoder_runs.fetch_add(1, std::memory_order_relaxed);
  const WhisperConfig& c = model_->config();
  const WhisperWeights& w = model_->weights();
  const int64_t full = c.n_audio_ctx;
  if (n_ctx == 0) n_ctx = full;
  check_arg(n_ctx >= 1 && n_ctx <= full, "[whisper] batch encode: an audio context of " +
                                             std::to_string(n_ctx) + " positions outside [1, " +
                                             std::to_string(full) + "]");
  const int64_t n = int64_t(slots.size()), frames = 2 * n_ctx;
  check_arg(n >= 1, "[whisper] batch encode: no slots");
  check_arg(mels.ndim() == 3 && mels.dim(0) == n && mels.dim(1) == c.n_mels &&
                mels.dim(2) >= frames && is_float(mels.dtype()),
            "[whisper] batch encode: mels " + mels.describe() + ", expected f32[" +
                std::to_string(n) + ", " + std::to_string(c.n_mels) +
                ", >= " + std::to_string(frames) + "]");
  std::vector<char> seen(size_t(n_slots_), 0);
  for (int32_t s : slots) {
    check_slot(s, "encode");
    check_arg(!seen[size_t(s)],
              "[whisper] batch encode: slot " + std::to_string(s) + " listed twice");
    seen[size_t(s)] = 1;
  }
  const int64_t h = c.n_text_head, dh = c.n_text_state / h;
  Tensor features = pool_.alloc({n * n_ctx, c.n_audio_state}, model_->dtype());
  encoder_forward(pool_, *model_, mels, features, n_ctx);

  // A short window's K/V rows go to the first n_ctx positions of each of its heads: one
  // scatter per layer, to the rows listed here (the same for every layer).
  Tensor short_rows;
  if (n_ctx < full) {
    std::vector<int32_t> rows;
    rows.reserve(size_t(2 * n * h * n_ctx));
    for (int64_t kv_i = 0; kv_i < 2; ++kv_i)
      for (int64_t r = 0; r < n; ++r)
        for (int64_t j = 0; j < h; ++j) {
          const int64_t at = ((kv_i * n_slots_ + slots[size_t(r)]) * h + j) * full;
          for (int64_t p = 0; p < n_ctx; ++p) rows.push_back(int32_t(at + p));
        }
    short_rows = ids_on_device(pool_, host_pool_, rows, model_->device());
  }
  // Cross-attention K/V of every window: one GEMM per layer over the batch, then each
  // window's [2, H, n_ctx, dh] into its slot.
  for (size_t i = 0; i < cache_.size(); ++i) {
    const Tensor kv = linear(pool_, features, w.decoder_layers[i].cross_kv);  // [n * n_ctx, 2d]
    Tensor heads = pool_.alloc({2, n, h, n_ctx, dh}, kv.dtype());
    permute(kv.reshape({n, n_ctx, 2, h, dh}), {2, 0, 3, 1, 4}, heads);  // [2, n, H, n_ctx, dh]
    if (n_ctx < full) {
      Tensor dst = cache_[i].cross_kv.reshape({-1, dh});
      scatter_rows(heads.reshape({-1, dh}), short_rows, dst);
      continue;
    }
    const int64_t per_window = h * full * dh;
    const Tensor src = heads.reshape({2 * n, per_window});
    const Tensor dst = cache_[i].cross_kv.reshape({2 * int64_t(n_slots_), per_window});
    for (int kv_i = 0; kv_i < 2; ++kv_i) {
      for (int64_t r = 0; r < n; ++r) {
        const int64_t to = kv_i * n_slots_ + slots[size_t(r)];
        Tensor d = dst.slice0(to, to + 1);
        d.copy_from(src.slice0(kv_i * n + r, kv_i * n + r + 1));
      }
    }
  }
  for (int32_t s : slots) {
    reset(s);
    audio_len_[size_t(s)] = int32_t(n_ctx);
  }
}

}  // namespace parley

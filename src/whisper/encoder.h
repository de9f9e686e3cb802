// Internal to src/whisper: the transformer blocks that the encoder (encoder.cpp) and
// decoder (decoder.cpp) forward passes are built from. Every intermediate comes from the
// session's Pool on the model's device, so a warm session allocates nothing per step.
#pragma once

#include <atomic>
#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "engine/device.h"
#include "engine/ops/matmul.h"
#include "engine/ops/timestamp_rule.h"
#include "engine/pool.h"
#include "engine/tensor.h"
#include "whisper/weights.h"

namespace parley {
class WhisperModel;
}

namespace parley::whisper {

// The encoder over a batch of windows: mel [B, n_mels, 2 * n_audio_ctx] (any float dtype, any
// device) -> features [B * n_audio_ctx, n_audio_state] (model's dtype and device) after the
// final layer norm. The GEMMs and convolutions run over the whole batch; on the parity path
// the self-attention runs per window, so a window's features do not depend on the batch
// beyond the GEMM library's own blocking.
// A mel wider than 2 * n_audio_ctx frames (a 3000-frame window under LoadOptions::audio_ctx)
// is cut to its first 2 * n_audio_ctx frames first. n_ctx in [1, n_audio_ctx] encodes only
// the first n_ctx positions (2 * n_ctx frames) instead, features [B * n_ctx, n_audio_state]
// (a batch session's short windows, TranscribeOptions::fit_audio_ctx); 0: n_audio_ctx.
void encoder_forward(Pool& pool, const WhisperModel& model, const Tensor& mel, Tensor& features,
                     int64_t n_ctx = 0);
// mel [..., F] -> its first `frames` columns [..., frames] on mel's device and dtype (from
// `pool` when that is mel's device); mel itself when F == frames. Error(invalid_argument)
// when F < frames.
Tensor leading_frames(Pool& pool, const Tensor& mel, int64_t frames);

// x [T, in] -> [T, out] = x @ w.weight^T + w.bias. In the CPU int8 configuration a
// decoder weight (LinearWeights::q8) multiplies through matmul_quant (ops/quant_matmul.h)
// and an encoder weight (LinearWeights::i8) through matmul_i8 (ops/int8_matmul.h), here and
// in every function below that takes LinearWeights.
Tensor linear(Pool& pool, const Tensor& x, const LinearWeights& w);
// x [T, d] += y [T, in] @ w.weight^T + w.bias (the residual add, fused into the matmul)
void linear_residual(const Tensor& y, const LinearWeights& w, Tensor& x);
// LayerNorm over the last dim, eps 1e-5 (as torch.nn.LayerNorm's default).
Tensor layer_norm(Pool& pool, const Tensor& x, const LayerNormWeights& ln);
// y = layer_norm(x; ln) @ weight^T with opt's bias, beta, gelu (opt.trans_b is set here).
// Where `fold` holds the norm's folded vectors (WhisperModel fills them for CUDA models of
// 16-bit weights), one GEMM normalizes x as it reads it (MatmulOptions::norm: a greedy
// decoder step has no LayerNorm launch); else the LayerNorm, then the GEMM.
void normed_matmul(Pool& pool, const Tensor& x, const LayerNormWeights& ln,
                   const NormFoldWeights& fold, const Tensor& weight, Tensor& y,
                   MatmulOptions opt = {});
// The same against a LinearWeights (its q8 when quantized: the LayerNorm, then matmul_quant
// with opt's bias and beta, then the GELU when opt.gelu).
void normed_matmul(Pool& pool, const Tensor& x, const LayerNormWeights& ln,
                   const NormFoldWeights& fold, const LinearWeights& w, Tensor& y,
                   MatmulOptions opt = {});
// layer_norm(x; ln) [T, in] -> [T, out] = ... @ w.weight^T + w.bias (normed_matmul).
Tensor normed_linear(Pool& pool, const Tensor& x, const LayerNormWeights& ln,
                     const NormFoldWeights& fold, const LinearWeights& w);
// x [T, d] += fc2(gelu(fc1(layer_norm(x)))); `fold`: mlp_ln folded into fc1 (normed_matmul).
void mlp_block(Pool& pool, Tensor& x, const LayerNormWeights& ln, const LinearWeights& fc1,
               const LinearWeights& fc2, const NormFoldWeights& fold = {});
// x [T, n * d] (n projections side by side, each H heads of d_head) -> [n, H, T, d_head]
Tensor split_heads(Pool& pool, const Tensor& x, int n, int n_head);
// x [1, H, T, d_head] -> [T, H * d_head]
Tensor merge_heads(Pool& pool, const Tensor& x);

// Logits f32 [T, n_vocab] on x's device of the decoder's final hidden states x [T, d]: the
// final LayerNorm, then the GEMM against the token embedding, f32 out of the GEMM whatever
// the weights' dtype (f32 accumulation: 16-bit logits would flip argmaxes between near-equal
// candidates). The session and the batch session both end their passes here.
// With int8 weights (LoadOptions::int8) the q8_0 product, in f32 near the top and for the
// special tokens.
Tensor final_logits(Pool& pool, const Tensor& x, const WhisperWeights& w, int64_t n_vocab);
// The same into logits f32 [T, n_vocab] (a buffer of the caller's: a graph's output).
void final_logits(Pool& pool, const Tensor& x, const WhisperWeights& w, Tensor& logits);
// final_logits of one row x [1, d] and its token choice in one op (matmul_masked_top1,
// ops/reduce.h: on CUDA the vocabulary GEMM's blocks rank their own logits): masked_topk's
// k = 1 under `mask` (i8 [n_vocab]) and `rules` [1, kRuleWidth] into logprobs f32 and ids
// i32 [1, 1], and advance's outputs where given (the logits stay in a `pool` buffer).
void final_logits_top1(Pool& pool, const Tensor& x, const WhisperWeights& w, int64_t n_vocab,
                       const Tensor& mask, const Tensor& rules, Tensor& logprobs, Tensor& ids,
                       const TimestampRuleAdvance* advance = nullptr);

// i32 values (token ids, positions, cache rows) as a tensor on `dev`, staged through
// host_pool (both pools' blocks are reused, so a warm step allocates nothing).
Tensor ids_on_device(Pool& pool, Pool& host_pool, std::span<const int32_t> ids, Device dev);
// The same into dst (i32 [ids.size()] on any device: a graph's fixed input buffer).
void ids_to(Pool& host_pool, std::span<const int32_t> ids, Tensor& dst);
// Error(invalid_argument) "<where>: token id N outside [0, n_vocab)" for the first id out of
// range.
void check_token_ids(std::span<const int32_t> tokens, int n_vocab, const std::string& where);

// decode_choose's ids suppressed at every position as an i8 [n_vocab] mask on a device,
// rebuilt only when the ids change, always in the same buffer (graphs that read it stay
// valid).
class SuppressMask {
 public:
  const Tensor& get(std::span<const int32_t> ids, int n_vocab, Device dev);

 private:
  Tensor mask_;
  std::vector<int32_t> ids_;
};

// masked_topk's outputs, ids i32 and logprobs f32 [rows, k] on any device, to the host.
void read_choices(const Tensor& ids, const Tensor& logprobs, std::vector<int32_t>& out_ids,
                  std::vector<float>& out_logprobs);

// Behind whisper_run_counters() (model.h).
extern std::atomic<uint64_t> g_encoder_runs;
extern std::atomic<uint64_t> g_encoder_graph_launches;
extern std::atomic<uint64_t> g_decoder_runs;

}  // namespace parley::whisper

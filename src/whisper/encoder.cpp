// The Whisper encoder forward pass (WhisperSession::encode) and the blocks shared with
// the decoder. Reference: openai/whisper model.py AudioEncoder / ResidualAttentionBlock:
//   x = gelu(conv1(mel)); x = gelu(conv2(x)); x = x.T + positions
//   per block: x += attn(ln(x)); x += mlp(ln(x)); then ln_post(x)
// Attention scaling: the reference scales q and k each by d_head^-0.25 before q @ k^T;
// here the q @ k^T GEMM scales the scores by 1 / sqrt(d_head) once (alpha; the decoder's
// attention op does the same, as CTranslate2 does), the same product up to f32 rounding.
#include "whisper/encoder.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <functional>
#include <vector>

#include "engine/env.h"
#include "engine/error.h"
#include "engine/ops/attention.h"
#include "engine/ops/conv.h"
#include "engine/ops/elementwise.h"
#include "engine/ops/embedding.h"
#include "engine/ops/matmul.h"
#include "engine/ops/norm.h"
#include "engine/ops/quant_matmul.h"
#include "engine/ops/reduce.h"
#include "engine/ops/softmax.h"
#include "engine/ops/spectral.h"
#include "engine/ops/transpose.h"
#include "whisper/encoder_graph.h"
#include "whisper/model.h"

namespace parley {
namespace whisper {

constexpr float kLayerNormEps = 1e-5f;

Tensor linear(Pool& pool, const Tensor& x, const LinearWeights& w) {
  Tensor y = pool.alloc({x.dim(0), w.weight.dim(0)}, x.dtype());  // [T, out]
  if (w.i8.defined()) {
    MatmulI8Options o;
    o.bias = &w.bias;
    matmul_i8(x, w.i8, y, o);
    return y;
  }
  if (w.quantized()) {
    MatmulQuantOptions q;
    q.bias = &w.bias;
    matmul_quant(x, w.q8, y, q);
    return y;
  }
  MatmulOptions opt;
  opt.trans_b = true;
  opt.bias = &w.bias;
  matmul(x, w.weight, y, opt);
  return y;
}

void linear_residual(const Tensor& y, const LinearWeights& w, Tensor& x) {
  if (w.i8.defined()) {
    MatmulI8Options o;
    o.bias = &w.bias;
    o.beta = 1.0f;
    matmul_i8(y, w.i8, x, o);
    return;
  }
  if (w.quantized()) {
    MatmulQuantOptions q;
    q.bias = &w.bias;
    q.beta = 1.0f;
    matmul_quant(y, w.q8, x, q);
    return;
  }
  MatmulOptions opt;
  opt.trans_b = true;
  opt.bias = &w.bias;
  opt.beta = 1.0f;
  matmul(y, w.weight, x, opt);
}

Tensor layer_norm(Pool& pool, const Tensor& x, const LayerNormWeights& ln) {
  Tensor y = pool.alloc(x.shape(), x.dtype());
  parley::layer_norm(x, ln.gamma, ln.beta, kLayerNormEps, y);
  return y;
}

namespace {

// gemm(a, opt) of a GEMM against a weight that reads layer_norm(x; ln), with opt.trans_b
// set: a = x with opt.norm where `fold` holds the norm's folded vectors, else a = the norm.
template <typename Gemm>
void with_norm(Pool& pool, const Tensor& x, const LayerNormWeights& ln, const NormFoldWeights& fold,
               MatmulOptions opt, Gemm gemm) {
  opt.trans_b = true;
  if (!fold.w_gamma.defined()) {
    gemm(layer_norm(pool, x, ln), opt);
    return;
  }
  Tensor scratch = pool.alloc(x.shape(), x.dtype());  // the norm, where the GEMM cannot fold it
  const NormInput norm{&ln.gamma, &ln.beta, kLayerNormEps, &fold.w_gamma, &fold.w_shift, &scratch};
  opt.norm = &norm;
  gemm(x, opt);
}

// y = layer_norm(x; ln) @ dequant(q)^T with opt's bias, beta and gelu (the int8 path: the
// norm on its own, never folded).
void quant_normed(Pool& pool, const Tensor& x, const LayerNormWeights& ln, const QuantMatrix& q,
                  Tensor& y, const MatmulOptions& opt) {
  const Tensor a = layer_norm(pool, x, ln);
  MatmulQuantOptions o;
  o.bias = opt.bias;
  o.beta = opt.beta;
  matmul_quant(a, q, y, o);
  if (opt.gelu) gelu(y, y);
}

}  // namespace

void normed_matmul(Pool& pool, const Tensor& x, const LayerNormWeights& ln,
                   const NormFoldWeights& fold, const Tensor& weight, Tensor& y,
                   MatmulOptions opt) {
  with_norm(pool, x, ln, fold, opt,
            [&](const Tensor& a, const MatmulOptions& o) { matmul(a, weight, y, o); });
}

void normed_matmul(Pool& pool, const Tensor& x, const LayerNormWeights& ln,
                   const NormFoldWeights& fold, const LinearWeights& w, Tensor& y,
                   MatmulOptions opt) {
  if (w.i8.defined()) {
    MatmulI8Options o;
    o.bias = opt.bias;
    o.beta = opt.beta;
    o.gelu = opt.gelu;
    matmul_i8(layer_norm(pool, x, ln), w.i8, y, o);
    return;
  }
  if (w.quantized()) return quant_normed(pool, x, ln, w.q8, y, opt);
  normed_matmul(pool, x, ln, fold, w.weight, y, opt);
}

Tensor normed_linear(Pool& pool, const Tensor& x, const LayerNormWeights& ln,
                     const NormFoldWeights& fold, const LinearWeights& w) {
  Tensor y = pool.alloc({x.dim(0), w.weight.dim(0)}, x.dtype());  // [T, out]
  MatmulOptions opt;
  opt.bias = &w.bias;
  normed_matmul(pool, x, ln, fold, w, y, opt);
  return y;
}

void mlp_block(Pool& pool, Tensor& x, const LayerNormWeights& ln, const LinearWeights& fc1,
               const LinearWeights& fc2, const NormFoldWeights& fold) {
  Tensor hidden = pool.alloc({x.dim(0), fc1.weight.dim(0)}, x.dtype());  // [T, 4d]
  MatmulOptions opt;
  opt.bias = &fc1.bias;
  opt.gelu = true;  // one launch for a decoder step's few rows (the GEMM's epilogue)
  normed_matmul(pool, x, ln, fold, fc1, hidden, opt);
  linear_residual(hidden, fc2, x);
}

Tensor split_heads(Pool& pool, const Tensor& x, int n, int n_head) {
  const int64_t t = x.dim(0), d_head = x.dim(1) / (int64_t(n) * n_head);
  Tensor heads = pool.alloc({n, n_head, t, d_head}, x.dtype());
  permute(x.reshape({t, n, n_head, d_head}), {1, 2, 0, 3}, heads);
  return heads;
}

Tensor merge_heads(Pool& pool, const Tensor& x) {
  const int64_t h = x.dim(1), t = x.dim(2), d_head = x.dim(3);
  Tensor merged = pool.alloc({t, h * d_head}, x.dtype());
  Tensor merged_4d = merged.reshape({1, t, h, d_head});
  permute(x, {0, 2, 1, 3}, merged_4d);
  return merged;
}

namespace {

// Text rows whose q8 logit is near the top are recomputed in f32: those within kSigmas
// estimated standard deviations of the error of the kExactTop-th largest (a decision over at
// most kExactTop - k suppressed tokens and a top k still sees exact values: the default
// suppress list has about 90 ids, beam search asks for 6).
constexpr int64_t kExactTop = 128;
constexpr double kSigmas = 16;

// The int8 configuration's logits [T, n_vocab] of the decoder's final hidden states x [T, d]:
// the q8_0 product for every row of the vocabulary, then the f32 product for the rows a
// decision can turn on. A q8 logit's error is a sum of d independent rounding errors (the
// weight's, d_w / 2 at most, and the activation's 8-bit rounding in the fast kernel,
// d_x / 2), close to Gaussian with variance sum over 32-value blocks of
// d_w^2 / 12 * |x|_2^2 + d_x^2 / 12 * |w|_2^2, estimated per row with each block's largest
// d_w and |w|_2^2 over the vocabulary (logits_max_d, logits_max_l2). (A worst-case bound is
// 25-30x that standard deviation on tiny.en and would pick half the vocabulary; the largest
// error seen on the shared clips is 4.8 of them.) Text rows whose q8 logit is within
// kSigmas of them below the kExactTop-th largest, and every row from logits_exact_from on,
// are gathered and multiplied in f32 (matmul, as the f32 configuration), so greedy and beam
// choices are the f32 ones; the other logits enter only softmax normalizers. (Sampling at a
// temperature draws from the whole distribution: WhisperSession decodes it with the f32
// weights, WhisperModel::f32_weights.)
void quant_logits(Pool& pool, const Tensor& x, const WhisperWeights& w, Tensor& logits) {
  const Tensor a = layer_norm(pool, x, w.decoder_ln);
  MatmulOptions f32;
  f32.trans_b = true;
  matmul_quant(a, w.logits_q8, logits, {});
  const int64_t t = a.dim(0), d = a.dim(1), n_vocab = logits.dim(1);
  const int64_t text = std::min(w.logits_exact_from, n_vocab), blocks = d / 32;
  std::vector<char> pick(size_t(text), 0);
  std::vector<float> heap;
  for (int64_t i = 0; i < t; ++i) {
    const float* xi = a.data<float>() + i * d;
    double var = 0;
    for (int64_t b = 0; b < blocks; ++b) {
      double l2 = 0, amax = 0;
      for (int k = 0; k < 32; ++k) {
        const double v = xi[b * 32 + k];
        l2 += v * v;
        amax = std::max(amax, std::fabs(v));
      }
      // 1.125: the weight's error is d_w / 2 plus its f16 scale's rounding (127 * 2^-11 d_w).
      const double dw = 1.125 * w.logits_max_d[size_t(b)], dx = amax / 127.0;
      var += dw * dw / 12.0 * l2 + dx * dx / 12.0 * w.logits_max_l2[size_t(b)];
    }
    const float margin = float(kSigmas * std::sqrt(var) + 1e-4);
    const float* z = logits.data<float>() + i * n_vocab;
    const int64_t k = std::min(kExactTop, text);
    heap.clear();  // a min-heap of the k largest q8 logits
    for (int64_t j = 0; j < text; ++j) {
      if (int64_t(heap.size()) < k) {
        heap.push_back(z[j]);
        std::push_heap(heap.begin(), heap.end(), std::greater<float>());
      } else if (z[j] > heap.front()) {
        std::pop_heap(heap.begin(), heap.end(), std::greater<float>());
        heap.back() = z[j];
        std::push_heap(heap.begin(), heap.end(), std::greater<float>());
      }
    }
    const float threshold = heap.empty() ? 0.0f : heap.front() - margin;
    for (int64_t j = 0; j < text; ++j)
      if (!(z[j] < threshold)) pick[size_t(j)] = 1;  // NaN: picked
  }
  std::vector<int32_t> rows;
  for (int64_t j = 0; j < text; ++j)
    if (pick[size_t(j)]) rows.push_back(int32_t(j));
  for (int64_t j = text; j < n_vocab; ++j) rows.push_back(int32_t(j));
  if (rows.empty()) return;
  const int64_t c = int64_t(rows.size());
  Tensor ids = pool.alloc({c}, DType::i32);
  std::memcpy(ids.raw(), rows.data(), size_t(c) * sizeof(int32_t));
  Tensor e = pool.alloc({c, d}, DType::f32);
  embedding(w.token_embedding, ids, e);
  Tensor exact_rows = pool.alloc({t, c}, DType::f32);
  matmul(a, e, exact_rows, f32);
  for (int64_t i = 0; i < t; ++i) {
    float* z = logits.data<float>() + i * n_vocab;
    const float* v = exact_rows.data<float>() + i * c;
    for (int64_t r = 0; r < c; ++r) z[rows[size_t(r)]] = v[r];
  }
}

}  // namespace

Tensor final_logits(Pool& pool, const Tensor& x, const WhisperWeights& w, int64_t n_vocab) {
  Tensor logits = pool.alloc({x.dim(0), n_vocab}, DType::f32);  // [T, n_vocab]
  final_logits(pool, x, w, logits);
  return logits;
}

void final_logits(Pool& pool, const Tensor& x, const WhisperWeights& w, Tensor& logits) {
  if (w.logits_q8.data) {
    quant_logits(pool, x, w, logits);
    return;
  }
  normed_matmul(pool, x, w.decoder_ln, w.decoder_fold, w.token_embedding, logits);
}

void final_logits_top1(Pool& pool, const Tensor& x, const WhisperWeights& w, int64_t n_vocab,
                       const Tensor& mask, const Tensor& rules, Tensor& logprobs, Tensor& ids,
                       const TimestampRuleAdvance* advance) {
  Tensor logits = pool.alloc({1, n_vocab}, DType::f32);
  if (w.logits_q8.data) {
    quant_logits(pool, x, w, logits);
    masked_topk(logits, &mask, rules, 1, logprobs, ids, advance);
    return;
  }
  with_norm(
      pool, x, w.decoder_ln, w.decoder_fold, {}, [&](const Tensor& a, const MatmulOptions& o) {
        matmul_masked_top1(a, w.token_embedding, logits, o, &mask, rules, logprobs, ids, advance);
      });
}

Tensor ids_on_device(Pool& pool, Pool& host_pool, std::span<const int32_t> ids, Device dev) {
  Tensor host = host_pool.alloc({int64_t(ids.size())}, DType::i32);
  std::memcpy(host.raw(), ids.data(), ids.size_bytes());
  if (dev == Device::cpu) return host;
  Tensor out = pool.alloc(host.shape(), DType::i32);
  out.copy_from(host);
  return out;
}

void ids_to(Pool& host_pool, std::span<const int32_t> ids, Tensor& dst) {
  dst.copy_from(ids_on_device(host_pool, host_pool, ids, Device::cpu));
}

const Tensor& SuppressMask::get(std::span<const int32_t> ids, int n_vocab, Device dev) {
  if (mask_.defined() && std::equal(ids.begin(), ids.end(), ids_.begin(), ids_.end())) return mask_;
  check_token_ids(ids, n_vocab, "[whisper] decode_choose (suppressed ids)");
  Tensor host = Tensor::zeros({n_vocab}, DType::i8);
  for (int32_t id : ids) host.data<int8_t>()[id] = 1;
  if (!mask_.defined()) mask_ = Tensor::empty({n_vocab}, DType::i8, dev);
  mask_.copy_from(host);
  ids_.assign(ids.begin(), ids.end());
  return mask_;
}

void read_choices(const Tensor& ids, const Tensor& logprobs, std::vector<int32_t>& out_ids,
                  std::vector<float>& out_logprobs) {
  const size_t n = size_t(ids.numel());
  out_ids.resize(n);
  out_logprobs.resize(n);
  if (ids.device() == Device::cpu) {
    std::copy_n(ids.data<int32_t>(), n, out_ids.data());
    std::copy_n(logprobs.data<float>(), n, out_logprobs.data());
  } else {
    cuda::memcpy_d2h(out_ids.data(), ids.raw(), n * sizeof(int32_t));
    cuda::memcpy_d2h(out_logprobs.data(), logprobs.raw(), n * sizeof(float));
  }
}

void check_token_ids(std::span<const int32_t> tokens, int n_vocab, const std::string& where) {
  for (int32_t id : tokens) {
    check_arg(id >= 0 && id < n_vocab, where + ": token id " + std::to_string(id) +
                                           " outside [0, " + std::to_string(n_vocab) + ")");
  }
}

namespace {

// out [1, H, Tq, dh] = softmax(q @ k^T / sqrt(dh)) @ v for q [1, H, Tq, dh], k and v
// [1, H, Tk, dh], as the reference's three unfused steps on batched GEMMs. On the CPU this
// is much faster than the attention op's loops at encoder length (1500 x 1500 scores per
// head); the scores buffer is H * Tq * Tk elements.
void unfused_attention(Pool& pool, const Tensor& q, const Tensor& k, const Tensor& v, Tensor& out) {
  const int64_t h = q.dim(1), tq = q.dim(2), tk = k.dim(2), dh = q.dim(3);
  Tensor scores = pool.alloc({h, tq, tk}, q.dtype());  // [H, Tq, Tk]
  MatmulOptions qk;
  qk.trans_b = true;
  qk.alpha = 1.0f / std::sqrt(float(dh));
  matmul(q.reshape({h, tq, dh}), k.reshape({h, tk, dh}), scores, qk);
  Tensor probs = pool.alloc(scores.shape(), scores.dtype());
  softmax(scores, probs);
  Tensor out_3d = out.reshape({h, tq, v.dim(3)});
  matmul(probs, v.reshape({h, tk, v.dim(3)}), out_3d);
}

// x [B * T, d] += out_proj(self_attention(ln(x))) per window of T rows, no mask. On CUDA in
// f16/bf16 one flash kernel (attention_qkv) over the batch; elsewhere (the f32 parity path)
// the three unfused steps, one window at a time (the scores are H * T * T elements).
void encoder_attention(Pool& pool, Tensor& x, int64_t b, const EncoderLayerWeights& l, int n_head) {
  const int64_t t = x.dim(0) / b, d = x.dim(1);
  const Tensor attn_in = layer_norm(pool, x, l.attn_ln);  // [B * T, d]
  const Tensor qkv = linear(pool, attn_in, l.attn_qkv);   // [B * T, 3d]
  Tensor merged = pool.alloc({b * t, d}, x.dtype());      // [B * T, d]
  if (x.device() == Device::cuda && x.dtype() != DType::f32) {
    // The fast path: flash attention straight from the projection, token-major.
    Tensor merged_3d = merged.reshape({b, t, d});
    attention_qkv(qkv.reshape({b, t, 3 * d}), n_head, merged_3d);
    linear_residual(merged, l.attn_out, x);
    return;
  }
  for (int64_t i = 0; i < b; ++i) {
    const Tensor heads = split_heads(pool, qkv.slice0(i * t, (i + 1) * t), 3, n_head);
    const Tensor q = heads.slice0(0, 1), k = heads.slice0(1, 2), v = heads.slice0(2, 3);
    Tensor attn = pool.alloc(q.shape(), q.dtype());  // [1, H, T, d_head]
    unfused_attention(pool, q, k, v, attn);
    Tensor window = merged.slice0(i * t, (i + 1) * t);
    Tensor window_4d = window.reshape({1, t, int64_t(n_head), d / n_head});
    permute(attn, {0, 2, 1, 3}, window_4d);  // merge_heads into the window's rows
  }
  linear_residual(merged, l.attn_out, x);
}

}  // namespace

Tensor leading_frames(Pool& pool, const Tensor& mel, int64_t frames) {
  check_arg(mel.ndim() >= 2 && mel.dim(-1) >= frames,
            "[whisper] encoder: mel " + mel.describe() + " has fewer than the " +
                std::to_string(frames) + " frames of its audio context");
  const int64_t width = mel.dim(-1), rows = mel.numel() / width;
  if (width == frames) return mel;
  Shape shape = mel.shape();
  shape[-1] = frames;
  Tensor out = mel.device() == pool.device() ? pool.alloc(shape, mel.dtype())
                                             : Tensor::empty(shape, mel.dtype(), mel.device());
  Tensor out_2d = out.reshape({rows, frames});
  copy_columns(mel.reshape({rows, width}), 0, frames, out_2d);
  return out;
}

// Batched: mel [B, n_mels, >= frames] on any device -> features [B * n_audio_ctx, d].
void encoder_forward(Pool& pool, const WhisperModel& model, const Tensor& mel_window,
                     Tensor& features, int64_t n_ctx) {
  const WhisperConfig& c = model.config();
  const WhisperWeights& w = model.weights();
  if (n_ctx == 0) n_ctx = c.n_audio_ctx;
  check_arg(n_ctx >= 1 && n_ctx <= c.n_audio_ctx, "[whisper] encoder: " + std::to_string(n_ctx) +
                                                      " positions outside [1, " +
                                                      std::to_string(c.n_audio_ctx) + "]");
  const int64_t b = mel_window.dim(0), frames = 2 * n_ctx, d = c.n_audio_state;
  const DType dt = model.dtype();
  // audio_ctx (LoadOptions) or n_ctx: the window's first 2 * n_ctx frames only.
  const Tensor mel = leading_frames(pool, mel_window, frames);

  // The mel on the model's device and dtype: [B, n_mels, frames]. One already so (the
  // encoder graph's input, encoder_graph.h) is read as it is; one on that device in another
  // dtype is converted straight into the pooled tensor: a cast's temporary there would be a
  // cudaMalloc and a cudaFree (which waits for the device) per window, 0.28 ms of idle GPU
  // before the first convolution (bench/RESULTS.md).
  Tensor mel_in = mel;
  if (mel.device() != model.device() || mel.dtype() != dt) {
    mel_in = pool.alloc({b, c.n_mels, frames}, dt);
    if (mel.device() == mel_in.device())
      convert(mel, mel_in);
    else
      mel_in.copy_from(mel.dtype() == dt ? mel : mel.cast(dt));
  }

  // The second convolution writes token-major rows with the bias and the GELU in the GEMM
  // (on CUDA one GEMM, rows = output positions: ops/conv.h), so its output is the residual
  // stream itself. On CUDA the first one does too (the second then gathers its windows from
  // token-major rows); the CPU convolves channel-major and would permute there and back.
  // PARLEY_CONV_TOKENS=0: channel-major convolutions and a permute (to compare).
  static const bool tokens = env_switch_on("PARLEY_CONV_TOKENS");
  const bool rows_between = tokens && model.device() == Device::cuda;
  Conv1dOptions conv1_opt;
  conv1_opt.padding = 1;
  conv1_opt.bias = &w.conv1_bias;
  conv1_opt.tokens_out = rows_between;
  conv1_opt.gelu = true;
  Tensor conv1_out = rows_between ? pool.alloc({b, frames, d}, dt)   // [B, 3000, d]
                                  : pool.alloc({b, d, frames}, dt);  // [B, d, 3000]
  conv1d(mel_in, w.conv1_weight, conv1_out, conv1_opt);

  Conv1dOptions conv2_opt;
  conv2_opt.stride = 2;
  conv2_opt.padding = 1;
  conv2_opt.bias = &w.conv2_bias;
  conv2_opt.tokens_in = rows_between;
  conv2_opt.tokens_out = tokens;
  conv2_opt.gelu = true;
  Tensor x = pool.alloc({b * n_ctx, d}, dt);  // [B * 1500, d]
  Tensor x_3d = x.reshape({b, n_ctx, d});
  if (tokens) {
    conv1d(conv1_out, w.conv2_weight, x_3d, conv2_opt);
  } else {
    Tensor conv2_out = pool.alloc({b, d, n_ctx}, dt);  // [B, d, 1500]
    conv1d(conv1_out, w.conv2_weight, conv2_out, conv2_opt);
    permute(conv2_out, {0, 2, 1}, x_3d);
  }
  add(x_3d, w.encoder_positions.slice0(0, n_ctx), x_3d);

  for (const EncoderLayerWeights& layer : w.encoder_layers) {
    // The GEMMs run over all B * 1500 rows; attention is per window.
    encoder_attention(pool, x, b, layer, c.n_audio_head);
    mlp_block(pool, x, layer.mlp_ln, layer.fc1, layer.fc2);
  }
  parley::layer_norm(x, w.encoder_ln.gamma, w.encoder_ln.beta, kLayerNormEps, features);
}

}  // namespace whisper

void WhisperSession::encode(const Tensor& mel) {
  using namespace whisper;
  g_encoder_runs.fetch_add(1, std::memory_order_relaxed);
  const WhisperConfig& c = model_->config();
  const WhisperWeights& w = model_->weights();
  const int64_t frames = 2 * int64_t(c.n_audio_ctx);
  check_arg(mel.ndim() == 2 && mel.dim(0) == c.n_mels && mel.dim(1) >= frames,
            "[whisper] encode: mel " + mel.describe() + ", expected f32[" +
                std::to_string(c.n_mels) + ", >= " + std::to_string(frames) + "]");
  check_arg(is_float(mel.dtype()), "[whisper] encode: mel must be a float tensor");
  // audio_ctx: the first 2 * n_audio_ctx frames, cut here so the encoder graph's input
  // keeps one shape.
  const Tensor window = leading_frames(pool_, mel, frames);
  // Cross-attention K/V depend only on the audio: once per window, every decoder layer's
  // in one GEMM, token-major [1500, n_text_layer * 2d] as the decoder's attention reads it.
  MatmulOptions kv_opt;
  kv_opt.trans_b = true;
  kv_opt.bias = &w.decoder_cross_kv.bias;
  const auto pass = [&](Pool& pool, const Tensor& m) {
    encoder_forward(pool, *model_, m, audio_features_);
    matmul(audio_features_, w.decoder_cross_kv.weight, cross_kv_, kv_opt);
  };
  const Tensor mel_3d = window.reshape({1, c.n_mels, frames});
  if (encoder_graph_)  // CUDA: a graph from the second window on (encoder_graph.h)
    encoder_graph_->run(mel_3d, pass);
  else
    pass(pool_, mel_3d);
  n_cached_ = 0;
  chain_next_ = -1;
  beam_chain_active_ = false;
  encoded_ = true;
}

}  // namespace parley

// WhisperModel (immutable weights + config, shared by every request) and WhisperSession
// (one request's state: audio features, cross-attention K/V, self-attention KV cache,
// scratch buffers). The forward passes live in encoder.cpp and decoder.cpp.
//
// Parity path: LoadOptions{Device::cpu, DType::f32} converts every weight to f32 and runs
// the reference's math in f32 (see encoder.cpp / decoder.cpp for the op order).
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "engine/device.h"
#include "engine/dtype.h"
#include "engine/pool.h"
#include "engine/tensor.h"
#include "whisper/config.h"
#include "whisper/tokenizer.h"
#include "whisper/weights.h"

namespace parley {

struct GreedyChainStart;  // logit_filters.h
struct BeamChainStart;    // beam_search.h
struct BeamStepRecord;    // beam_search.h

namespace whisper {
class DecodeGraphs;  // decode_graphs.h: CUDA graphs of decoder steps
class EncoderGraph;  // encoder_graph.h: the CUDA graph of a session's encoder pass
struct RowsInput;    // decode_graphs.h: a rows step's inputs
class SuppressMask;  // encoder.h
}  // namespace whisper

// Process-wide counts of Whisper forward passes (every model, every session), so tests
// and /metrics can prove that work did or did not reach the network (the VAD gate).
struct WhisperRunCounters {
  uint64_t encoder_runs = 0;  // WhisperSession::encode calls
  uint64_t decoder_runs = 0;  // WhisperSession::decode calls
  // encode calls that launched the session's captured encoder graph (encoder_graph.h)
  uint64_t encoder_graph_launches = 0;
};
WhisperRunCounters whisper_run_counters();

struct LoadOptions {
  Device device = Device::cpu;  // where weights live and the forward pass runs
  DType dtype = DType::f32;     // weights and activations; f32 = the parity path
  // Encoder context truncation (whisper.cpp's audio_ctx): 0 = the model's own n_audio_ctx
  // (1500 positions, 30 s); N in [1, n_audio_ctx] = the encoder runs on the first 2N mel
  // frames of each window (N * 20 ms of audio) with the first N positional embeddings, and
  // the decoder cross-attends to those N positions. Faster on slow machines, for short live
  // utterances; audio past N * 20 ms of a window is not heard. config().n_audio_ctx is N.
  int audio_ctx = 0;
  // The CPU int8 configuration (`--dtype int8`): the decoder's linear layers and its
  // vocabulary product multiply q8_0 copies of their f32 weights (quantize_q8_0,
  // ops/quant_matmul.h: activations quantized per 32 values on the fly); the encoder, the
  // cross-attention K/V projection of the audio and attention stay f32. dtype stays f32.
  bool int8 = false;
  // With int8 (`--int8-encoder`): the encoder's linear layers (q|k|v, out, fc1, fc2)
  // multiply per-row 8-bit copies of their weights with 7-bit activations (matmul_i8,
  // ops/int8_matmul.h), about 15 % off an encoder pass on AVX2; convolutions and attention
  // stay f32. Needs a oneDNN build (Error(unsupported) otherwise).
  bool int8_encoder = false;
};

// The on-disk layouts WhisperModel::load reads.
enum class WhisperLayout {
  ctranslate2,  // model.bin (+ config.json, tokenizer.json): faster-whisper's layout
  huggingface,  // config.json + model.safetensors (+ tokenizer.json)
  mlx,          // config.json + weights.safetensors or weights.npz, no tokenizer files
  ggml,         // a whisper.cpp ggml .bin file (or a directory holding exactly one)
};
const char* layout_name(WhisperLayout layout);  // "ctranslate2", "huggingface", "mlx", "ggml"

struct DetectedLayout {
  WhisperLayout layout;
  std::string weights;  // the file the weights come from
};
// Which layout `path` (a directory, or a ggml file) holds, from its file names and the
// ggml magic, without reading weights; nullopt when none fits.
std::optional<DetectedLayout> detect_whisper_layout(const std::string& path);
// What WhisperSession::cross_attention_weights returns (word timestamps, timing.h).
struct CrossAttentionWeights {
  Tensor logits;  // f32 [T, n_vocab] on the CPU
  Tensor qk;      // f32 [n_heads, T, n_audio_ctx] on the CPU: q k^T / sqrt(d_head) of each
                  // requested head, before the softmax (the reference's QK hook output)
};

class WhisperModel {
 public:
  // Loads a model: a directory in the CTranslate2, Hugging Face or mlx-community layout,
  // or a whisper.cpp ggml file (detect_whisper_layout). Throws Error(not_found) when none
  // is there, invalid_argument / unsupported for malformed or unsupported files.
  static std::shared_ptr<const WhisperModel> load(const std::string& dir,
                                                  const LoadOptions& opt = {});

  // The model's dimensions; n_audio_ctx is LoadOptions::audio_ctx where that truncates it.
  const WhisperConfig& config() const { return config_; }
  // The encoder positions the model was trained with (1500), whatever audio_ctx is.
  int trained_audio_ctx() const { return trained_audio_ctx_; }
  // layout_name(): "ctranslate2" | "huggingface" | "mlx" | "ggml"
  const std::string& format() const { return format_; }
  const std::string& dir() const { return dir_; }  // the path given to load()
  Device device() const { return opt_.device; }
  DType dtype() const { return opt_.dtype; }
  bool int8() const { return opt_.int8; }  // LoadOptions::int8: q8_0 decoder weights
  const WhisperWeights& weights() const { return weights_; }
  // weights() without the int8 configuration's q8_0 copies (the same tensors).
  const WhisperWeights& f32_weights() const { return opt_.int8 ? f32_weights_ : weights_; }
  // A ggml file's vocabulary (token bytes by id); empty for the other layouts.
  const std::vector<std::string>& ggml_vocab() const { return ggml_vocab_; }

  // Use load(); public for std::make_shared.
  WhisperModel(std::string dir, std::string format, WhisperConfig config, WhisperWeights weights,
               LoadOptions opt, std::vector<std::string> ggml_vocab = {});

 private:
  std::string dir_;
  std::string format_;
  WhisperConfig config_;
  WhisperWeights weights_;
  LoadOptions opt_;
  WhisperWeights f32_weights_;  // LoadOptions::int8: weights_ less its q8_0 copies
  std::vector<std::string> ggml_vocab_;
  int trained_audio_ctx_ = 0;
};

// Mel frames of audio in one transcription window: 3000 (30 s), or 2 * audio_ctx when
// LoadOptions::audio_ctx truncates the encoder (the seek loop's window then fits it).
int64_t whisper_window_frames(const WhisperModel& model);

// The encoder context that fits `content_frames` mel frames of audio (10 ms each) with room
// to spare (TranscribeOptions::fit_audio_ctx): the audio's positions (20 ms each) plus 2 s,
// rounded up to a whole 5 s (250 positions), at least 15 s (750); the model's own
// n_audio_ctx when that is no more.
int fitted_audio_ctx(const WhisperModel& model, int64_t content_frames);

// Where load_tokenizer looks for tiktoken ranks (multilingual.tiktoken / gpt2.tiktoken)
// when a model has no tokenizer of its own (the mlx-community layout), in order:
//   $PARLEY_VOCAB_DIR, then $PARLEY_HOME/whisper (default ~/.local/share/parley/whisper,
//   or $XDG_DATA_HOME/parley/whisper), then the build's PARLEY_WHISPER_VOCAB_DIR
//   (CMake cache variable; default the source tree's ../shared/data/whisper).
std::vector<std::string> default_vocab_dirs();

// The tokenizer of a loaded model:
//   ggml: the file's own vocabulary (WhisperTokenizer::from_ggml_vocab);
//   a tokenizer.json beside the weights (CTranslate2 and Hugging Face layouts carry one);
//   otherwise (mlx) the tiktoken ranks, multilingual.tiktoken for multilingual models and
//   gpt2.tiktoken for English-only ones, from the model directory itself, then
//   `vocab_dirs` in order. Throws not_found naming every place it looked.
WhisperTokenizer load_tokenizer(const WhisperModel& model,
                                const std::vector<std::string>& vocab_dirs);
WhisperTokenizer load_tokenizer(const WhisperModel& model);  // with default_vocab_dirs()

// Per-request state. Not thread-safe; one session per concurrent request.
class WhisperSession {
 public:
  // Allocates the KV caches for n_text_ctx positions and the cross-attention K/V; they are
  // reused across windows.
  explicit WhisperSession(std::shared_ptr<const WhisperModel> model);

  // mel: f32 [n_mels, F] on the CPU or the model's device, F >= 2 * n_audio_ctx (a 30 s
  // window is 3000 frames; with audio_ctx N only its first 2N are encoded). Runs the encoder, keeps
  // the audio features and computes every decoder layer's cross-attention K/V once. Drops cached
  // tokens.
  void encode(const Tensor& mel);
  // [n_audio_ctx, d] on the model's device, in the model's dtype.
  const Tensor& audio_features() const { return audio_features_; }

  // Runs the decoder on `tokens` at positions n_cached() .. n_cached() + size - 1 (after
  // the cached ones) and appends them to the cache. Returns f32 logits on the CPU of the
  // positions `rows` (indices into tokens, in order; empty: all), [rows.size() or
  // tokens.size(), n_vocab]: a window's initial pass needs two rows, not one per prompt token.
  // Needs encode() first.
  Tensor decode(std::span<const int32_t> tokens, std::span<const int64_t> rows = {});

  // The reference's find_alignment forward (whisper/timing.py): the decoder over `tokens`
  // from position 0 without the KV cache, keeping the cross-attention scores of `heads`
  // ((layer, head) pairs). Needs encode() first; drops cached tokens. Defined in
  // decoder_alignment.cpp.
  CrossAttentionWeights cross_attention_weights(std::span<const int32_t> tokens,
                                                std::span<const std::pair<int, int>> heads);

  // Drops cached tokens (and rows), keeps the audio features.
  void reset() {
    n_cached_ = 0;
    n_rows_ = 0;
    chain_next_ = -1;
    beam_chain_active_ = false;
  }
  int n_cached() const { return n_cached_; }
  // With int8 weights (LoadOptions::int8): decode with the f32 weights (true: sampling at a
  // temperature, where any difference in the logits moves a draw) or the q8_0 ones (false,
  // the default). No effect otherwise.
  void set_full_precision(bool on) { full_precision_ = on; }

  // Batched decoding of several candidates of one window (beam search, best_of), one decoder
  // pass per step for all of them. fork(n) after decode() of the shared initial tokens makes
  // n rows; the shared positions [0, n_cached()) are kept once, each row caches only its own
  // positions after them (per layer [rows, n_text_ctx, d]; grown, never shrunk).
  // decode_rows(tokens): one token per row at position n_cached(), logits f32 [n, n_vocab]
  // on the CPU. reorder_rows(source): row i continues former row source[i]; rows are slots
  // behind an index, so only a row taken by two successors is copied (its own positions).
  // decode() throws while rows are in use; reset() and encode() end them.
  void fork(int n_rows);
  Tensor decode_rows(std::span<const int32_t> tokens);
  void reorder_rows(std::span<const int32_t> source);
  int n_rows() const { return rows_active() ? n_rows_ : 0; }
  // Keeps the first n cached positions (prompt / prefix reuse); 0 <= n <= n_cached(). Ends a
  // greedy chain (chain_begin).
  void truncate(int n);

  // One decoder step with the token choice made next to the logits (the engine's
  // masked_topk, on the model's device): decode() of one token, or decode_rows() of one
  // token per row while rows are in use, then masked_topk of each row's logits with
  // `always` (ids suppressed at every position; kept on the device while they stay the same)
  // and `rules` (kRuleWidth per row, logit_filters.h), keeping each row's top k.
  // Only the choices cross to the host: ids and log-probabilities [rows * k], valid until
  // the next call. On CUDA a single-token step with k = 1 replays one graph that includes
  // the choice, so a greedy step uploads its token and rule row and reads back one id; a
  // rows step (beam search) likewise replays one graph per (offset, rows, k).
  struct Choices {
    std::vector<int32_t> ids;
    std::vector<float> logprobs;
  };
  const Choices& decode_choose(std::span<const int32_t> tokens, std::span<const int32_t> always,
                               std::span<const int32_t> rules, int k);
  // A window's initial pass with its choice next to the logits: decode() of the initial
  // `tokens`, masked_topk (k) of the last position's logits under `always` and `rule` (one
  // rule row: the first sampled position's), and the logits of position `sot_index` (the
  // no-speech probability's row) copied to `sot_logits` (f32 [n_vocab] on the CPU). Only
  // that row and the choices cross to the host.
  const Choices& decode_initial_choose(std::span<const int32_t> tokens, int64_t sot_index,
                                       std::span<const int32_t> always,
                                       std::span<const int32_t> rule, int k, Tensor& sot_logits);

  // Greedy decoding kept on the device (decoder_chain.cpp): a chain of single-token steps,
  // each reading its token and rule row from device memory that the step before it wrote
  // (masked_topk's id, then the engine's advance_timestamp_rule), so the host can queue step
  // t + 1 before it reads step t's id. chain_begin(start) starts after the cached tokens
  // (uploads start.token, its rule row and state; the suppress mask as decode_choose).
  // chain_launch() queues the next step at n_cached() and advances n_cached(): on CUDA one
  // graph per offset (decode_graphs.h), whose masked_topk writes the id and log-probability
  // straight into pinned host memory, and an event after it, without waiting; on the CPU the
  // step runs at once. chain_result(offset) returns the id and log-probability of the launched
  // step at `offset`, waiting for that step only. To drop steps launched past the end of a
  // sequence, truncate() the cache; the chain then needs a new chain_begin.
  //
  // chain_begin_initial(tokens, sot_index, start) starts the chain at a window's initial pass
  // instead (none of it cached before): decode() of the initial `tokens` is the chain's first
  // step, at offset n_cached() - 1 after it; it chooses the first sampled token under
  // start.rule (step_rule after `tokens`) from start.state (timestamp_rule_state of no
  // sampled token) and queues an asynchronous copy of position sot_index's logits, which
  // chain_initial_logits() returns (f32 [n_vocab] on the CPU, valid until the next chain),
  // waiting for that pass only. So a window's first token needs no host round trip either.
  void chain_begin(const GreedyChainStart& start);
  void chain_begin_initial(std::span<const int32_t> tokens, int64_t sot_index,
                           const GreedyChainStart& start);
  void chain_launch();
  std::pair<int32_t, float> chain_result(int offset);
  std::span<const float> chain_initial_logits();

  // Beam search kept on the device (beam_chain.cpp): after fork() and the search's first
  // step (made on the host: its rows are all the same sequence), a chain of rows steps, each
  // reading its tokens, slots, rule rows, grammar states, scores and finished count from device
  // memory that the step before it wrote: the rows' decoder pass, masked_topk (k = rows + 1),
  // then the engine's beam_step (the candidates ranked, the finished ones taken out, the next
  // tokens, slots and rule rows) and copy_slot_rows (a row that two successors continue is
  // copied, as reorder_rows does). beam_chain_begin(start) starts it at n_cached() from the
  // rows as they are (their slots are the session's); beam_chain_launch() queues the next step
  // (on CUDA one graph per offset and rows) and advances n_cached() without waiting;
  // beam_chain_result(offset) returns what the step at `offset` did (waiting for it only:
  // its record is written straight into pinned host memory), valid until the next call.
  // beam_chain_end() ends the chain and the rows (the steps launched past the end wrote
  // slots the host no longer follows); the shared cache stays: n_cached() is fork()'s again.
  void beam_chain_begin(const BeamChainStart& start);
  // beam_chain_begin_initial(tokens, sot_index, n_rows, start) starts the chain at a window's
  // initial pass instead (nothing of it cached before, no rows): decode() of the initial
  // `tokens`, fork(n_rows), then the search's first step on the device from the last
  // position's top n_rows + 1 under the rule of `start` (one row: the last initial token, the
  // first sampled position's rule row, the grammar state of no sampled token, score 0): the
  // chain's first step, at offset n_cached() - 1 after it. Position sot_index's logits go to
  // the host asynchronously: beam_chain_initial_logits() returns them (f32 [n_vocab] on the
  // CPU, valid until the next chain), waiting for that pass only.
  void beam_chain_begin_initial(std::span<const int32_t> tokens, int64_t sot_index, int n_rows,
                                const BeamChainStart& start);
  std::span<const float> beam_chain_initial_logits();
  void beam_chain_launch();
  const BeamStepRecord& beam_chain_result(int offset);
  void beam_chain_end();

  const WhisperModel& model() const { return *model_; }

 private:
  struct LayerCache {
    // [n_text_ctx, 3d] token-major, each position's q|k|v as the fused projection writes
    // it (decoder.cpp); positions [0, n_cached) are valid.
    Tensor self_qkv;
  };

  // decode()'s forward pass on token ids already on the model's device: f32 logits [n_out,
  // n_vocab] there, of the positions row_ids (i32 on the device; null: all t). Device work
  // only (a graph may capture it).
  Tensor step_logits(const Tensor& ids, int64_t t, int64_t offset, const Tensor* row_ids,
                     int64_t n_out);
  // step_logits before the final LayerNorm and the vocabulary product: the decoder's hidden
  // states [n_out, d] of those positions, in the model's dtype.
  Tensor step_hidden(const Tensor& ids, int64_t t, int64_t offset, const Tensor* row_ids,
                     int64_t n_out);
  // A step of the rows (decode_rows; decode_choose while rows are in use): checks, the
  // inputs in one upload, the forward pass (a graph replay on CUDA), n_cached() + 1.
  // k = 0: {f32 logits [rows, n_vocab]}; else {ids i32, logprobs f32} [rows, k] of
  // masked_topk with `mask` (i8 [n_vocab]) and `rules`. On the model's device, valid until
  // the next step.
  std::vector<Tensor> rows_step(std::span<const int32_t> tokens, std::span<const int32_t> rules,
                                const Tensor* mask, int k);
  // rows_step's forward pass on its inputs: f32 logits [rows, n_vocab] on the model's
  // device. Device work only (a graph may capture it).
  Tensor rows_logits(const whisper::RowsInput& in, int64_t offset);
  // The start of a decoder pass over `tokens` after the cached ones (decode(), the initial
  // pass): the checks, with logits rows `rows` (indices into tokens); ends rows of an earlier
  // window; counts the run. `what` names the caller in errors.
  void begin_pass(std::span<const int32_t> tokens, std::span<const int64_t> rows,
                  const std::string& what);
  // A window's initial pass (decode_initial_choose, chain_begin_initial): the forward pass
  // over `tokens` after the cached ones, keeping the logits of positions sot_index and the
  // last: f32 [2, n_vocab] on the model's device. `extra` (i32 values the caller needs on the
  // device) goes up in the same copy as the token ids (on CUDA a copy from the host waits for
  // the stream: one, not three); its view there is *extra_out. Advances n_cached().
  Tensor initial_logits(std::span<const int32_t> tokens, int64_t sot_index,
                        std::span<const int32_t> extra, Tensor* extra_out, const std::string& what);
  // The chain's buffers (once per session) and its suppress mask for `start`.
  void chain_setup(const GreedyChainStart& start);
  // The chain's choice at `offset` from f32 logits [1, n_vocab] on the device: masked_topk
  // under io row offset % 2's rule into the history, then advance_timestamp_rule into io row
  // (offset + 1) % 2. Device work only (a graph may capture it).
  void chain_choose(const Tensor& logits, int64_t offset);
  // chain_choose from a step's final hidden state x [1, d] (step_hidden): the vocabulary
  // product and the choice in one op (whisper::final_logits_top1).
  void chain_step_choose(const Tensor& x, int64_t offset);
  // The checks of a device choice's arguments (decode_choose, decode_initial_choose): k in
  // [1, min(kMaskedTopKMax, n_vocab)], kRuleWidth rule values per row. `what` names the caller.
  void check_choice(int k, size_t rules, int64_t rows, const std::string& what) const;
  // The suppress mask of the device choice for `always`, on the model's device (one session
  // buffer that a new set of ids overwrites in place: whisper::SuppressMask).
  const Tensor& choice_mask(std::span<const int32_t> always);

  std::shared_ptr<const WhisperModel> model_;
  Pool pool_;       // scratch on the model's device
  Pool host_pool_;  // logits and token ids on the CPU
  Tensor audio_features_;
  std::vector<LayerCache> cache_;
  // [n_audio_ctx, n_text_layer * 2d] token-major: decoder layer i's cross-attention k in
  // columns [2d * i, 2d * i + d) and its v in the next d (one GEMM per window, encoder.cpp).
  Tensor cross_kv_;
  int n_cached_ = 0;
  bool full_precision_ = false;
  const WhisperWeights& decoder_weights() const {
    return full_precision_ ? model_->f32_weights() : model_->weights();
  }
  bool encoded_ = false;
  std::shared_ptr<whisper::DecodeGraphs> graphs_;         // CUDA only (null elsewhere)
  std::shared_ptr<whisper::EncoderGraph> encoder_graph_;  // CUDA only (null elsewhere)

  // Batched rows (fork / decode_rows / reorder_rows).
  struct RowCache {
    // [row_capacity, n_text_ctx, 3d] q|k|v as LayerCache::self_qkv; slot s holds a row's
    // positions [0, n): the shared ones copied at fork(), then its own.
    Tensor qkv;
  };
  bool rows_active() const { return n_rows_ > 0 && n_cached_ >= fork_at_; }
  std::vector<RowCache> row_cache_;
  int row_capacity_ = 0;
  int n_rows_ = 0;
  int fork_at_ = 0;
  std::vector<int32_t> row_slot_;      // row -> slot in row_cache_
  std::vector<char> reorder_taken_;    // reorder_rows scratch: slots taken by successors
  std::vector<int32_t> reorder_next_;  // reorder_rows scratch: the next row -> slot map

  // decode_choose.
  std::shared_ptr<whisper::SuppressMask> choice_mask_;
  Choices choices_;

  // chain_begin / chain_launch / chain_result.
  struct Chain;  // decoder_chain.cpp
  std::shared_ptr<Chain> chain_;
  // The offset the chain's next step decodes; -1: no chain (reset, truncate and encode end
  // it, as do steps decoded any other way, which move n_cached_ away from it).
  int chain_next_ = -1;

  // beam_chain_begin / beam_chain_launch / beam_chain_result.
  struct BeamChain;  // beam_chain.cpp
  std::shared_ptr<BeamChain> beam_chain_;
  bool beam_chain_active_ = false;  // the rows' slots are on the device, not in row_slot_
  // The chain's buffers (once per session), checks of `start` (m rows of it) and the chain's
  // settings for n rows.
  void beam_chain_setup(const BeamChainStart& start, int64_t n, int64_t m, const std::string& what);
  // A chained beam step's work after the logits (f32 [m, n_vocab] on the device: the rows',
  // or m = 1 at the initial pass) at `offset`: masked_topk, beam_step, copy_slot_rows (not
  // while a graph's eager run warms up, and not for one row). Device work only (a graph
  // captures it).
  void beam_chain_choose(const Tensor& logits, int64_t offset);
};

}  // namespace parley

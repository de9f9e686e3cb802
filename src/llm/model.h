// LlmModel: a chat model's immutable weights and its batched forward pass over ragged rows
// with a paged KV cache (DESIGN.md section 8). The forward never sees a request: each row
// brings its new tokens, the position of the first, its block table, and whether it wants
// logits. Per-call state lives in KvCache (the keys and values) and ForwardScratch (a
// Pool for intermediates: after the first call of a batch shape, a call of the same shape
// makes no system allocation).
//
// Parity path (the CPU): all weights are f32 in memory (16-bit safetensors are widened once
// at load; f32 files are zero-copy views of the mapped file) and every op computes in f32.
// CUDA (LlmLoadOptions): the weights in bf16, f16 or f32 on the GPU, activations and the KV
// cache in the same dtype, every op accumulating in f32; norms and logits stay f32.
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "engine/ops/paged_attention.h"
#include "engine/pool.h"
#include "engine/step_graphs.h"
#include "engine/tensor.h"
#include "llm/config.h"
#include "llm/kv_cache.h"
#include "llm/weights.h"

namespace parley {

struct BatchRow {
  std::span<const int32_t> tokens;       // new tokens, at positions start_pos, start_pos + 1, ..
  int32_t start_pos = 0;                 // positions before it are already in the cache
  std::span<const int32_t> block_table;  // KV blocks covering [0, start_pos + tokens.size())
  bool want_logits = true;               // logits of the row's last token
  bool logits_all = false;               // logits of every new token (prefill parity checks)
};

struct StepInputs;  // llm/blocks.h

struct Batch {
  std::vector<BatchRow> rows;
};

// Reusable per-caller state of forward(): keep one per engine thread, on the model's device.
struct ForwardScratch {
  explicit ForwardScratch(Device device = Device::cpu) : pool(device), host(Device::cpu) {}
  Pool pool;  // intermediates, on the model's device
  Pool host;  // the rows' ids, positions and tables staged on the host (CUDA), host logits
  std::vector<PagedRow> paged;      // rows as the attention op takes them
  std::vector<int32_t> logit_rows;  // token indices whose logits are returned
  PagedTables tables;               // the rows on the device (CUDA)
  // CUDA: leave the logits on the device instead of copying them to the host (a benchmark
  // of the forward pass alone; sampling reads host logits). Valid until the next forward.
  bool logits_on_device = false;
  // CUDA decode steps (every row one token that wants its logits; dense families): graphs
  // keyed by (rows, key chunks of the longest row), and the fixed device buffers they read
  // (the step's i32 inputs, uploaded before each launch) and write (the logits).
  // PARLEY_CUDA_GRAPHS=0 runs every step eagerly.
  StepGraphs graphs;
  Tensor graph_input, graph_logits;
  // keep_hidden: forward() also leaves every new token's hidden state in `hidden` ([T, H] in
  // the batch's token order, on the model's device, valid until the next forward): the state
  // the model's first MTP module reads (after or before model.norm, MtpWeights). Decode steps
  // then run without graphs.
  bool keep_hidden = false;
  Tensor hidden;
};

struct LlmLoadOptions {
  Device device = Device::cpu;  // cuda: weights uploaded once, forward() on the GPU
  DType dtype = DType::f32;     // weights, activations and KV: f32 on the CPU; CUDA any float
};

class LlmModel {
 public:
  // DIR/config.json and DIR/model.safetensors, or the shards that
  // DIR/model.safetensors.index.json lists.
  // A .gguf file, or a folder without config.json holding one, goes to load_gguf_llm
  // (llm/gguf_loader.h).
  static LlmModel load(const std::string& dir, const LlmLoadOptions& options = {});
  // The weights by role from `src` under transformers' names, on src's target device and
  // dtype (quantized weights moved there too); rope_freq_factors (optional, host f32
  // [head_dim / 2]) divide the global RoPE frequencies.
  static LlmModel from_source(LlmConfig config, const TensorSource& src,
                              Tensor rope_freq_factors = Tensor());
  LlmModel(LlmConfig config, LlmWeights weights);

  const LlmConfig& config() const { return config_; }
  Device device() const { return device_; }
  DType dtype() const { return dtype_; }  // activations and KV cache
  const LlmWeights& weights() const { return weights_; }

  // logits: f32 [n, vocab] on the host (from a scratch pool; on the device with
  // scratch.logits_on_device), n = the logits the rows ask for, in row order: every new
  // token of a logits_all row, else the last token of a want_logits row. The cache and the
  // scratch must be on the model's device (the cache in its dtype).
  void forward(const Batch& batch, KvCache& cache, Tensor& logits, ForwardScratch& scratch) const;

  // The checkpoint's MTP modules (llm/mtp.h); 0: none.
  int n_mtp() const { return int(weights_.mtp.size()); }
  // MTP module `module` over a batch whose row tokens are the tokens after the target's
  // (row token j at position start_pos + j is token i + 1 of the target's position i =
  // start_pos + j), `hidden` [T, H] the target's hidden states at those positions
  // (ForwardScratch::hidden, rows in the batch's token order). Writes the module's keys and
  // values into `cache` (mtp_cache_config's one layer, the target's block tables) and
  // returns logits as forward() does: of the token two after each position asked for.
  void forward_mtp(const Batch& batch, const Tensor& hidden, KvCache& cache, Tensor& logits,
                   ForwardScratch& scratch, int module = 0) const;

 private:
  // A batch's i32 inputs staged on the host (and uploaded for an eager step).
  struct Staged {
    Tensor ids, pos, slots, out_rows;
    int64_t n_tok = 0, n_out = 0;
    bool decode_step = false;  // every row one token that wants its logits
  };
  Staged stage(const Batch& batch, KvCache& cache, ForwardScratch& s) const;
  void upload(Staged& st, ForwardScratch& s) const;  // CUDA: every input in one copy
  void run_mtp_device(const MtpWeights& m, const StepInputs& step, const Tensor& ids,
                      const Tensor& hidden, const Tensor& out_rows, KvCache& cache, Pool& pool,
                      Pool& host, Tensor& dev_logits) const;
  // A decode step through ForwardScratch::graphs (forward's inputs staged on the host).
  void forward_decode_graph(int64_t n_rows, const Tensor& ids, const Tensor& pos,
                            const Tensor& slots, KvCache& cache, Tensor& logits,
                            ForwardScratch& s) const;
  // The device work of a forward: ids (i32 [T]) to dev_logits (f32 [n_out, vocab]) of the
  // tokens out_rows names; the step's other inputs on the model's device.
  // hidden_out: every token's hidden state as ForwardScratch::hidden holds it.
  void run_device(const StepInputs& step, const Tensor& ids, const Tensor& out_rows, KvCache& cache,
                  Pool& pool, Pool& host, Tensor& dev_logits, Tensor* hidden_out = nullptr) const;

  LlmConfig config_;
  LlmWeights weights_;
  Device device_ = Device::cpu;
  DType dtype_ = DType::f32;
  Tensor inv_freq_global_, inv_freq_local_;  // f32 [head_dim / 2] (ops/rope.h)
};

}  // namespace parley

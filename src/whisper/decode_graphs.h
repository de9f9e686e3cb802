// CUDA graphs of decoder steps (WhisperSession::decode, decode_rows, decode_choose,
// chain_launch on CUDA). A step queues about 13 small kernels per layer; launching them one by
// one costs more host time than they take on the GPU. The first step at a key runs eagerly
// (which also warms the pools, cuBLAS plans and scratch it needs), then the same work is
// captured into a graph; every later step at that key, in any window, replays the graph with
// one launch. Single-token steps (greedy) are keyed by cache offset, in three kinds: one that
// returns the logits; one that also makes the token choice on the device (masked_topk with
// k = 1), whose only inputs are the token and its rule row, uploaded together; and a chained
// greedy step (WhisperSession::chain_launch), whose token and rule row are in session buffers
// the previous step wrote, so it has no upload; it writes its inputs and outputs in other
// buffers than the ones it reads (by offset parity), so running it twice (eagerly, then as
// the captured graph) gives the same result. Rows steps (beam search, best_of: one token per
// row of a fork) are keyed by (offset, rows, k): k = 0 returns the rows' logits, k > 0 each
// row's top k; their inputs (tokens, slots, cache rows, rule rows: RowsInput) are one upload
// too. A chained beam step (WhisperSession::beam_chain_launch; key chain = true) reads its
// RowsInput from the session's beam chain buffer, which the step before it wrote, and has
// no outputs here (its record goes to pinned memory); its eager run before the capture
// leaves out the work that is not safe to run twice (warming()). The suppress mask of the choice
// lives in one session buffer that a new set of ids overwrites in place (encoder.h SuppressMask),
// so the graphs that read it stay valid.
//
// Why replay is safe: a step's shapes and pointers depend only on its key. Weights, KV
// caches, cross-attention K/V and the input buffers below never move (the row caches and the
// rows input move only when a fork needs more rows than before: reserve_rows drops the rows
// graphs then). Which slot a row reads and writes after reorder_rows is data in the rows
// input, not a pointer in the graph. The step's scratch tensors come from the session's Pool,
// whose blocks are never returned to the system while the session lives, and all work is
// ordered on one stream, so a replay may reuse blocks that other work used in between.
// Graphs are dropped when the engine's scratch buffer moves (cuda::scratch_generation()).
// PARLEY_CUDA_GRAPHS=0 turns them off.
// Limit: the backend has one stream for the process, and a capture records whatever any
// thread queues on it meanwhile; CUDA sessions in several threads must not decode at the
// same time with graphs on.
#pragma once

#include <compare>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <utility>
#include <vector>

#include "engine/device.h"
#include "engine/tensor.h"

namespace parley::whisper {

// The inputs of a rows step over B rows, views of one i32 buffer (on the CPU or the device;
// one upload fills it): [tokens B | slots B | cache_rows B | rules B * rule_width].
//   tokens:     the token of each row;
//   slots:      row -> slot of the row caches [capacity, n_text_ctx, 3d] (attention_tokens'
//               batch_index: the keys a row reads);
//   cache_rows: slot * n_text_ctx + offset, the row of a row cache viewed as
//               [capacity * n_text_ctx, 3d] that gets the row's new q|k|v (scatter_rows);
//   rules:      [B, rule_width] masked_topk's rule rows (steps with the choice only).
struct RowsInput {
  static int64_t size(int64_t b, int rule_width) { return b * (3 + rule_width); }
  RowsInput(const Tensor& buffer, int64_t b, int rule_width);
  Tensor tokens, slots, cache_rows, rules;
};

class DecodeGraphs {
 public:
  DecodeGraphs(int n_text_ctx, int rule_width);
  // Whether graphs are on for new sessions (the PARLEY_CUDA_GRAPHS environment variable).
  static bool enabled();

  // i32 [1 + rule_width] on the device: the token id a single-token step reads, then the rule
  // row of its token choice (the graphs' inputs; one upload).
  Tensor& input() { return input_; }
  Tensor token() const { return input_.slice0(0, 1); }  // i32 [1]
  Tensor rules() const;                                 // i32 [1, rule_width]

  enum class Kind { logits, choice, chain };
  // The outputs of the single-token step at `offset` (device memory, valid until the next
  // step of that kind): replays its graph, or runs `forward` and captures it for next time.
  const std::vector<Tensor>& step(int offset, Kind kind,
                                  const std::function<std::vector<Tensor>()>& forward);

  // The row caches were allocated for `capacity` rows: drops the rows graphs (they hold the
  // former caches' addresses) and sizes the rows input for that many rows.
  void reserve_rows(int capacity);
  // i32 on the device, RowsInput::size(capacity) values: a rows step's inputs at its front.
  const Tensor& rows_input() const { return rows_input_; }
  struct RowsKey {
    int offset = 0;  // cache position of the step
    int rows = 0;
    int k = 0;           // 0: the logits; else the top k of each row
    bool chain = false;  // a chained beam step (WhisperSession::beam_chain_launch)
    auto operator<=>(const RowsKey&) const = default;
  };
  // True while a step's first, eager run (the one before its capture) is under way. A step
  // whose work is not safe to run twice (a chained beam step's slot copies: the second run
  // would read slots the first one overwrote) leaves that work out of the eager run.
  bool warming() const { return warming_; }
  // step() for a rows step, whose inputs `forward` reads from rows_input(). Its outputs are
  // buffers shared by every rows graph of the same (rows, k), valid until the next such step:
  // each graph ends by copying its outputs there. Outputs of their own per key would hold a
  // pool block per captured offset (rows x n_vocab f32 logits for k = 0), so every first
  // visit of an offset would grow the pool.
  const std::vector<Tensor>& rows_step(const RowsKey& key,
                                       const std::function<std::vector<Tensor>()>& forward);

 private:
  struct Entry {
    std::shared_ptr<cuda::Graph> graph;
    std::vector<Tensor> outputs;  // the captured step's output buffers
  };
  // `shared` (may be null): buffers the graph copies its outputs into, made on first use.
  // programmatic: captured with programmatic dependent launches (cuda::begin_capture).
  const std::vector<Tensor>& replay_or_capture(Entry& e,
                                               const std::function<std::vector<Tensor>()>& forward,
                                               std::vector<Tensor>* shared, bool programmatic);
  void drop_if_stale();  // every graph, when the scratch buffer moved

  Tensor input_;
  Tensor rows_input_;
  int rule_width_ = 0;
  std::vector<Entry> entries_[3];  // single-token steps by kind, then offset
  std::map<RowsKey, Entry> rows_;  // rows steps; dropped graphs leave empty entries
  std::map<std::pair<int, int>, std::vector<Tensor>> rows_outputs_;  // by (rows, k)
  uint64_t generation_ = 0;
  bool warming_ = false;
};

}  // namespace parley::whisper

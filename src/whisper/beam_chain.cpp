// Beam search kept on the device (WhisperSession::beam_chain_begin_initial /
// beam_chain_begin / beam_chain_launch / beam_chain_result / beam_chain_end, model.h).
// beam_chain_begin_initial makes a window's initial pass, the fork into the rows' slots and
// the search's first step (beam_step with one row of candidates: the rows are one sequence)
// the chain's start, queued without a wait. A chained beam step decodes one token per
// row, chooses each row's top rows + 1 with masked_topk under the suppress mask and the row's
// rule row, then the engine's beam_step (ops/beam_step.h) ranks the candidates, takes out the
// finished ones and writes the next step's tokens, slots, cache rows, rule rows, grammar
// states, scores and finished count, and its record for the host; copy_slot_rows copies the
// own positions of a row that two successors continue (reorder_rows' rule, on the device).
// The host reads records one step behind the device, as the greedy chain reads ids
// (decoder_chain.cpp), so the GPU does not idle while the host follows the search.
//
// Buffers on the model's device:
//   io      i32 [2, width(kMaxRows)]: per offset parity, a step's inputs, laid out for its
//           rows n as [RowsInput (tokens, slots, cache_rows, rules) | states n * 3 | sums n
//           (f32) | finished 1 | copy_from n]. The step at offset o reads row o % 2 and writes
//           row (o + 1) % 2.
//   first   i32 [1]: the first position a slot copy copies (fork()'s offset: the shared
//           positions before it are the same in every slot).
//   history i32 [n_text_ctx, beam_record_width(kMaxRows)]: per offset the step's record; on
//           CUDA pinned host memory that beam_step writes directly.
// A chained step is not safe to run twice over the same inputs (its copies overwrite slots
// that rows of the step read), so the eager run before a graph's capture stops after
// masked_topk (DecodeGraphs::warming) and only the graph runs beam_step and the copies.
#include <algorithm>
#include <cstring>

#include "engine/error.h"
#include "engine/ops/beam_step.h"
#include "engine/ops/reduce.h"
#include "whisper/beam_search.h"
#include "whisper/chain_history.h"
#include "whisper/decode_graphs.h"
#include "whisper/encoder.h"
#include "whisper/logit_filters.h"
#include "whisper/model.h"

namespace parley {

namespace {

// The most rows a chain runs: masked_topk's k = rows + 1 candidates per row, and beam_step's
// rows * k candidates in one block.
constexpr int64_t kMaxRows = kBeamChainMaxRows;
static_assert(kMaxRows * (kMaxRows + 1) <= kBeamStepMaxCandidates &&
              kMaxRows + 1 <= kMaskedTopKMax);

int64_t io_width(int64_t n) {
  return whisper::RowsInput::size(n, kRuleWidth) + n * kTimestampRuleState + 3 * n + 1;
}

// The views of one io row (i32 [io_width(kMaxRows)]) for n rows.
struct BeamIo {
  BeamIo(const Tensor& row, int64_t n)
      : rows(row, n, kRuleWidth),
        states(row.slice0(whisper::RowsInput::size(n, kRuleWidth),
                          whisper::RowsInput::size(n, kRuleWidth) + n * kTimestampRuleState)
                   .reshape({n, kTimestampRuleState})) {
    const int64_t at = whisper::RowsInput::size(n, kRuleWidth) + n * kTimestampRuleState;
    sums = Tensor::view(row.slice0(at, at + n).raw(), {n}, DType::f32, row.device(), nullptr);
    finished = row.slice0(at + n, at + n + 1);
    copy_from = row.slice0(at + n + 1, at + 2 * n + 1);
  }
  whisper::RowsInput rows;
  Tensor states, sums, finished, copy_from;
};

}  // namespace

struct WhisperSession::BeamChain {
  BeamChain(Device device, const WhisperConfig& c)
      : io(Tensor::zeros({2, io_width(kMaxRows)}, DType::i32, device)),
        first(Tensor::zeros({1}, DType::i32, device)),
        history(device, c.n_text_ctx, beam_record_width(kMaxRows), c.n_vocab) {}
  Tensor io;     // i32 [2, io_width(kMaxRows)]
  Tensor first;  // i32 [1]
  // Per offset the step's record, and the initial pass's <|startoftranscript|> row when the
  // chain began there.
  whisper::ChainHistory history;
  const Tensor* mask = nullptr;
  BeamStepParams params;
  int begin = 0;          // the chain's first offset
  BeamStepRecord record;  // beam_chain_result's
};

void WhisperSession::beam_chain_setup(const BeamChainStart& start, int64_t n, int64_t m,
                                      const std::string& what) {
  using namespace whisper;
  const WhisperConfig& c = model_->config();
  check_arg(!beam_chain_active_, what + ": a beam chain is running; beam_chain_end() first");
  check_arg(n >= 1 && n <= kMaxRows, what + ": " + std::to_string(n) + " rows; a chain runs 1 to " +
                                         std::to_string(kMaxRows));
  check_arg(start.tokens.size() == size_t(m) && start.sums.size() == size_t(m) &&
                start.rules.size() == size_t(m * kRuleWidth) &&
                start.states.size() == size_t(m * kTimestampRuleState),
            what + ": the start's tokens, sums, rules and states are not for " + std::to_string(m) +
                " rows");
  check_token_ids(start.tokens, c.n_vocab, what);
  check_arg(start.max_finished >= 1 && start.finished >= 0 && start.finished < start.max_finished,
            what + ": finished " + std::to_string(start.finished) + " of " +
                std::to_string(start.max_finished));
  if (!beam_chain_) beam_chain_ = std::make_shared<BeamChain>(model_->device(), c);
  BeamChain& ch = *beam_chain_;
  ch.mask = &choice_mask(start.always);
  ch.params.max_finished = start.max_finished;
  ch.params.slot_stride = c.n_text_ctx;
  ch.params.grammar = start.grammar;
  ch.history.forget_initial();
}

namespace {

// The io row of a step over the m rows of `start` at `offset` (their slots `slots`), then
// the copies' first position, staged on the host: i32 [io_width(kMaxRows) + 1].
std::vector<int32_t> stage_io(const BeamChainStart& start, int64_t m, const int32_t* slots,
                              int64_t offset, int n_text_ctx, int first) {
  std::vector<int32_t> v(size_t(io_width(kMaxRows) + 1), 0);
  const Tensor row = Tensor::view(v.data(), {io_width(kMaxRows)}, DType::i32, Device::cpu, nullptr);
  BeamIo staged(row, m);
  for (int64_t r = 0; r < m; ++r) {
    staged.rows.tokens.data<int32_t>()[r] = start.tokens[size_t(r)];
    staged.rows.slots.data<int32_t>()[r] = slots[r];
    staged.rows.cache_rows.data<int32_t>()[r] = slots[r] * n_text_ctx + int32_t(offset);
    staged.sums.data<float>()[r] = start.sums[size_t(r)];
  }
  std::copy(start.rules.begin(), start.rules.end(), staged.rows.rules.data<int32_t>());
  std::copy(start.states.begin(), start.states.end(), staged.states.data<int32_t>());
  staged.finished.data<int32_t>()[0] = start.finished;
  v.back() = first;
  return v;
}

}  // namespace

void WhisperSession::beam_chain_begin(const BeamChainStart& start) {
  const WhisperConfig& c = model_->config();
  const std::string what = "[whisper] beam_chain_begin";
  check_arg(encoded_ && rows_active(), what + ": no rows; fork() first");
  check_arg(n_cached_ + 1 <= c.n_text_ctx, what + ": the text context is full");
  beam_chain_setup(start, n_rows_, n_rows_, what);
  BeamChain& ch = *beam_chain_;
  std::vector<int32_t> staged =
      stage_io(start, n_rows_, row_slot_.data(), n_cached_, c.n_text_ctx, fork_at_);
  const Tensor host =
      Tensor::view(staged.data(), {int64_t(staged.size())}, DType::i32, Device::cpu, nullptr);
  Tensor input = host;
  if (model_->device() != Device::cpu) {  // one upload, into the session's pool
    input = pool_.alloc(host.shape(), DType::i32);
    input.copy_from(host);
  }
  const int parity = n_cached_ % 2;
  const int64_t w = io_width(kMaxRows);
  ch.io.slice0(parity, parity + 1).reshape({w}).copy_from(input.slice0(0, w));
  ch.first.copy_from(input.slice0(w, w + 1));
  ch.begin = n_cached_;
  beam_chain_active_ = true;
}

void WhisperSession::beam_chain_begin_initial(std::span<const int32_t> tokens, int64_t sot_index,
                                              int n_rows, const BeamChainStart& start) {
  using namespace whisper;
  const WhisperConfig& c = model_->config();
  const std::string what = "[whisper] beam_chain_begin_initial";
  check_arg(encoded_, what + ": call encode() first");
  check_arg(!tokens.empty() && start.tokens.size() == 1 && start.tokens[0] == tokens.back(),
            what + ": the start is one row whose token is the last initial token");
  beam_chain_setup(start, n_rows, 1, what);
  BeamChain& ch = *beam_chain_;
  // The initial pass's last position is the chain's first step; its io row (one row of
  // candidates, slot 0) goes up with the pass's token ids, `first` after it.
  const int64_t at = n_cached_ + int64_t(tokens.size()) - 1;
  const int32_t slot0 = 0;
  const std::vector<int32_t> staged = stage_io(start, 1, &slot0, at, c.n_text_ctx, int32_t(at + 1));
  Tensor io_in;
  const Tensor logits = initial_logits(tokens, sot_index, staged, &io_in, what);
  const int64_t w = io_width(kMaxRows);
  ch.io.slice0(at % 2, at % 2 + 1).reshape({w}).copy_from(io_in.slice0(0, w));
  ch.first.copy_from(io_in.slice0(w, w + 1));
  fork(n_rows);  // every slot gets the initial positions
  // The search's first step: one row of candidates for the n rows (one sequence in every
  // slot: no copies).
  beam_chain_choose(logits.slice0(1, 2), at);
  ch.history.keep_initial(logits.slice0(0, 1), at);
  ch.history.record(at);
  ch.begin = int(at);
  beam_chain_active_ = true;
}

std::span<const float> WhisperSession::beam_chain_initial_logits() {
  check_arg(beam_chain_active_ && beam_chain_->history.initial_offset() >= 0,
            "[whisper] beam_chain_initial_logits: the chain did not begin at an initial pass");
  return beam_chain_->history.initial();
}

void WhisperSession::beam_chain_choose(const Tensor& logits, int64_t offset) {
  BeamChain& ch = *beam_chain_;
  const int64_t m = logits.dim(0), n = n_rows_, k = n + 1;
  const int64_t w = ch.io.dim(1);
  const BeamIo in(ch.io.slice0(offset % 2, offset % 2 + 1).reshape({w}), m);
  const BeamIo next(ch.io.slice0((offset + 1) % 2, (offset + 1) % 2 + 1).reshape({w}), n);
  Tensor logprobs = pool_.alloc({m, k}, DType::f32), ids = pool_.alloc({m, k}, DType::i32);
  masked_topk(logits, ch.mask, in.rows.rules, int(k), logprobs, ids);
  if (graphs_ && graphs_->warming()) return;  // the rest runs in the graph only (above)
  Tensor record = ch.history.row(offset);
  BeamStepOut out{next.rows.tokens,     next.sums,      next.rows.slots,
                  next.rows.cache_rows, next.copy_from, next.states,
                  next.rows.rules,      next.finished,  record.slice0(0, beam_record_width(n))};
  BeamStepParams params = ch.params;
  params.next_position = int32_t(offset + 1);
  beam_step(ids, logprobs, {in.sums, in.rows.slots, in.states, in.finished}, out, params);
  if (m == 1) return;  // one sequence (or one row): every successor reads the same slot
  std::vector<Tensor> caches;
  for (RowCache& rc : row_cache_) caches.push_back(rc.qkv);
  copy_slot_rows(caches, out.slots, out.copy_from, ch.first, offset + 1);
}

void WhisperSession::beam_chain_launch() {
  using namespace whisper;
  const WhisperConfig& c = model_->config();
  check_arg(beam_chain_active_ && rows_active(),
            "[whisper] beam_chain_launch: no beam chain; call beam_chain_begin()");
  const int64_t offset = n_cached_;
  check_arg(offset + 1 <= c.n_text_ctx, "[whisper] beam_chain_launch: the text context of " +
                                            std::to_string(c.n_text_ctx) + " is full");
  g_decoder_runs.fetch_add(1, std::memory_order_relaxed);
  BeamChain& ch = *beam_chain_;
  auto forward = [&]() -> std::vector<Tensor> {
    const BeamIo in(ch.io.slice0(offset % 2, offset % 2 + 1).reshape({ch.io.dim(1)}), n_rows_);
    beam_chain_choose(rows_logits(in.rows, offset), offset);
    return {};
  };
  if (graphs_)
    graphs_->rows_step({int(offset), n_rows_, n_rows_ + 1, true}, forward);
  else
    forward();
  ch.history.record(offset);
  n_cached_ = int(offset + 1);
}

const BeamStepRecord& WhisperSession::beam_chain_result(int offset) {
  check_arg(beam_chain_active_ && offset >= beam_chain_->begin && offset < n_cached_,
            "[whisper] beam_chain_result: no chained beam step was launched at offset " +
                std::to_string(offset));
  BeamChain& ch = *beam_chain_;
  const size_t n = size_t(n_rows_);
  const int32_t* rec = ch.history.read(offset);
  auto as_float = [](int32_t bits) {
    float f;
    std::memcpy(&f, &bits, sizeof f);
    return f;
  };
  BeamStepRecord& r = ch.record;
  r.source.assign(rec, rec + n);
  r.tokens.assign(rec + n, rec + 2 * n);
  r.sums.resize(n);
  for (size_t i = 0; i < n; ++i) r.sums[i] = as_float(rec[2 * n + i]);
  const int32_t fresh = rec[3 * n];
  check(fresh >= 0 && size_t(fresh) <= n, ErrorKind::internal,
        "[whisper] beam_chain_result: a record with " + std::to_string(fresh) + " finished");
  r.finished.resize(size_t(fresh));
  for (size_t f = 0; f < size_t(fresh); ++f)
    r.finished[f] = {rec[3 * n + 2 + f], as_float(rec[4 * n + 2 + f])};
  r.completed = rec[3 * n + 1] != 0;
  return r;
}

void WhisperSession::beam_chain_end() {
  check_arg(beam_chain_active_, "[whisper] beam_chain_end: no beam chain");
  beam_chain_active_ = false;
  n_rows_ = 0;
  n_cached_ = fork_at_;
  chain_next_ = -1;
}

}  // namespace parley

// Greedy decoding kept on the device (WhisperSession::chain_begin / chain_launch /
// chain_result, model.h). A chained step decodes one token at the next position, chooses
// with masked_topk (k = 1) under the suppress mask and its rule row, writes the id and
// log-probability into the history at its offset, and (masked_topk's advance, in the same
// launch: engine/ops/timestamp_rule.h) writes the next step's token and rule row. The host reads
// ids one step behind the device, so the GPU never idles while the host looks at a token.
// chain_begin_initial makes a window's initial pass (several tokens, eager) the chain's first
// step: it chooses from its last position's logits as a chained step does, so the window's
// first token needs no host round trip either.
//
// Buffers on the model's device:
//   io      i32 [2, kIoWidth]: per offset parity, a step's input token, its rule row
//           (kRuleWidth) and the grammar's state after that token (kTimestampRuleState). The
//           step at offset o reads row o % 2 and writes row (o + 1) % 2, so it reads the same
//           inputs when it runs twice (decode_graphs.h: eagerly, then as the captured graph).
//   history i32 [n_text_ctx, 2] (chain_history.h): per offset the chosen id and the bits of
//           its f32 log-probability. On CUDA it is pinned host memory that masked_topk writes
//           directly (no copy after the step), and the host reads it once the step's event
//           has completed.
#include <algorithm>
#include <array>
#include <cstring>

#include "engine/error.h"
#include "engine/ops/reduce.h"
#include "engine/ops/timestamp_rule.h"
#include "whisper/chain_history.h"
#include "whisper/decode_graphs.h"
#include "whisper/encoder.h"
#include "whisper/logit_filters.h"
#include "whisper/model.h"

namespace parley {

namespace {

constexpr int64_t kIoWidth = 1 + kRuleWidth + kTimestampRuleState;

}  // namespace

struct WhisperSession::Chain {
  Chain(Device device, const WhisperConfig& c)
      : io(Tensor::zeros({2, kIoWidth}, DType::i32, device)),
        history(device, c.n_text_ctx, 2, c.n_vocab) {}
  Tensor io;  // i32 [2, kIoWidth]
  // Per offset the chosen id and the bits of its log-probability, and the initial pass's
  // <|startoftranscript|> row when the chain began there.
  whisper::ChainHistory history;
  TimestampRuleParams grammar;  // what the captured graphs pass to masked_topk's advance
  const Tensor* mask = nullptr;
  int begin = 0;  // the chain's first offset
};

void WhisperSession::chain_setup(const GreedyChainStart& start) {
  if (!chain_) {  // once per session
    chain_ = std::make_shared<Chain>(model_->device(), model_->config());
    chain_->grammar = start.grammar;
  }
  // The graphs keep the values they were captured with; a model has one vocabulary.
  check(chain_->grammar.eot == start.grammar.eot &&
            chain_->grammar.timestamp_begin == start.grammar.timestamp_begin,
        ErrorKind::internal, "[whisper] chain_begin: another eot / timestamp_begin than before");
  chain_->mask = &choice_mask(start.always);
  chain_->history.forget_initial();
}

namespace {

// The io row of a chain step: its input token, rule row and state.
std::array<int32_t, kIoWidth> io_row(const GreedyChainStart& start) {
  std::array<int32_t, kIoWidth> v{};
  v[0] = start.token;
  std::copy(start.rule.v.begin(), start.rule.v.end(), v.begin() + 1);
  std::copy(start.state.begin(), start.state.end(), v.begin() + 1 + kRuleWidth);
  return v;
}

}  // namespace

void WhisperSession::chain_begin(const GreedyChainStart& start) {
  using namespace whisper;
  const WhisperConfig& c = model_->config();
  check_arg(encoded_, "[whisper] chain_begin: call encode() first");
  check_arg(!rows_active(), "[whisper] chain_begin: rows are in use (fork); reset() first");
  check_token_ids({&start.token, 1}, c.n_vocab, "[whisper] chain_begin");
  chain_setup(start);
  n_rows_ = 0;  // rows of an earlier window end here
  const std::array<int32_t, kIoWidth> row = io_row(start);
  Tensor host = host_pool_.alloc({kIoWidth}, DType::i32);
  std::copy(row.begin(), row.end(), host.data<int32_t>());
  chain_->io.slice0(n_cached_ % 2, n_cached_ % 2 + 1).reshape({kIoWidth}).copy_from(host);
  chain_->begin = n_cached_;
  chain_next_ = n_cached_;
}

void WhisperSession::chain_begin_initial(std::span<const int32_t> tokens, int64_t sot_index,
                                         const GreedyChainStart& start) {
  using namespace whisper;
  const std::string what = "[whisper] chain_begin_initial";
  check_arg(encoded_, what + ": call encode() first");
  check_arg(!tokens.empty() && start.token == tokens.back(),
            what + ": start.token must be the last initial token");
  chain_setup(start);
  // The io row of the pass's last position goes up with the pass's token ids.
  const int64_t at = n_cached_ + int64_t(tokens.size()) - 1;  // the first token's step
  Tensor io_in;
  const Tensor logits = initial_logits(tokens, sot_index, io_row(start), &io_in, what);
  chain_->io.slice0(at % 2, at % 2 + 1).reshape({kIoWidth}).copy_from(io_in);
  chain_choose(logits.slice0(1, 2), at);
  chain_->history.keep_initial(logits.slice0(0, 1), at);
  chain_->history.record(at);
  chain_->begin = int(at);
  chain_next_ = n_cached_;
}

std::span<const float> WhisperSession::chain_initial_logits() {
  check_arg(chain_ && chain_->history.initial_offset() >= 0 &&
                chain_->history.initial_offset() < n_cached_,
            "[whisper] chain_initial_logits: the chain did not begin at an initial pass");
  return chain_->history.initial();
}

namespace {

// The views of a chained choice at one offset: its rule row and state in io, its outputs in
// the history and in io's other row.
struct ChainChoice {
  Tensor rule_in, state_in;   // io row offset % 2
  Tensor id, logprob;         // the history's row
  Tensor token, rule, state;  // io row (offset + 1) % 2
};

template <typename Choose>
void chain_choice(Tensor& io, whisper::ChainHistory& history, Device dev, int64_t offset,
                  const TimestampRuleParams& grammar, Choose choose) {
  int32_t* row = history.row(offset).data<int32_t>();
  const Tensor in = io.slice0(offset % 2, offset % 2 + 1).reshape({kIoWidth});
  const Tensor out = io.slice0((offset + 1) % 2, (offset + 1) % 2 + 1).reshape({kIoWidth});
  ChainChoice c;
  c.rule_in = in.slice0(1, 1 + kRuleWidth).reshape({1, kRuleWidth});
  c.state_in = in.slice0(1 + kRuleWidth, kIoWidth).reshape({1, kTimestampRuleState});
  c.id = Tensor::view(row, {1, 1}, DType::i32, dev, nullptr);
  c.logprob = Tensor::view(row + 1, {1, 1}, DType::f32, dev, nullptr);
  c.token = out.slice0(0, 1);
  c.rule = out.slice0(1, 1 + kRuleWidth).reshape({1, kRuleWidth});
  c.state = out.slice0(1 + kRuleWidth, kIoWidth).reshape({1, kTimestampRuleState});
  // The choice and the next step's input in one launch (the choice's advance).
  const TimestampRuleAdvance advance{&c.state_in, &c.state, &c.token, &c.rule, grammar};
  choose(c, advance);
}

}  // namespace

void WhisperSession::chain_choose(const Tensor& logits, int64_t offset) {
  Chain& ch = *chain_;
  chain_choice(ch.io, ch.history, model_->device(), offset, ch.grammar,
               [&](ChainChoice& c, const TimestampRuleAdvance& advance) {
                 masked_topk(logits, ch.mask, c.rule_in, 1, c.logprob, c.id, &advance);
               });
}

void WhisperSession::chain_step_choose(const Tensor& x, int64_t offset) {
  Chain& ch = *chain_;
  const WhisperConfig& c = model_->config();
  chain_choice(ch.io, ch.history, model_->device(), offset, ch.grammar,
               [&](ChainChoice& cc, const TimestampRuleAdvance& advance) {
                 whisper::final_logits_top1(pool_, x, model_->weights(), c.n_vocab, *ch.mask,
                                            cc.rule_in, cc.logprob, cc.id, &advance);
               });
}

void WhisperSession::chain_launch() {
  using namespace whisper;
  const WhisperConfig& c = model_->config();
  check_arg(chain_ && chain_next_ >= 0 && chain_next_ == n_cached_,
            "[whisper] chain_launch: no chain after the cached tokens; call chain_begin()");
  const int64_t offset = n_cached_;
  check_arg(offset + 1 <= c.n_text_ctx, "[whisper] chain_launch: the text context of " +
                                            std::to_string(c.n_text_ctx) + " is full");
  g_decoder_runs.fetch_add(1, std::memory_order_relaxed);
  auto forward = [&]() -> std::vector<Tensor> {
    const Tensor in = chain_->io.slice0(offset % 2, offset % 2 + 1).reshape({kIoWidth});
    chain_step_choose(step_hidden(in.slice0(0, 1), 1, offset, nullptr, 1), offset);
    return {};
  };
  if (graphs_)
    graphs_->step(int(offset), DecodeGraphs::Kind::chain, forward);
  else
    forward();
  chain_->history.record(offset);
  n_cached_ = int(offset + 1);
  chain_next_ = n_cached_;
}

std::pair<int32_t, float> WhisperSession::chain_result(int offset) {
  check_arg(
      chain_ && offset >= chain_->begin && offset < n_cached_ &&
          (chain_next_ < 0 || offset < chain_next_),
      "[whisper] chain_result: no chained step was launched at offset " + std::to_string(offset));
  const int32_t* h = chain_->history.read(offset);
  float logprob = 0;
  std::memcpy(&logprob, h + 1, sizeof(float));
  return {h[0], logprob};
}

}  // namespace parley

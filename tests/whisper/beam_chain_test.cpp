// Beam search chained on the device (engine beam_step, WhisperSession::beam_chain_*,
// decode_encoded with LogitsSource::chains_beam) against the step-by-step search it replaces
// (decode_choose and BeamSearch::update on the host): whole windows of the real tiny.en with
// beam sizes 1 (not chained) to 6, patience, timestamps on and off, a prompt, the sample_len and
// context limits and windows that never finish give the same DecodingResult and no-speech
// callbacks; cancellation between chained steps; the session's misuse errors.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "whisper/beam_search.h"
#include "whisper/decoding.h"
#include "whisper/logit_filters.h"
#include "whisper/model.h"
#include "whisper/tokenizer.h"
#include "whisper/whisper_test_util.h"

namespace parley {
namespace {

using whisper_test::have_tiny_en;
using whisper_test::jfk_window;
using whisper_test::model_dir;

// Forwards to a session with the device choice and, when `chain`, the beam chain forced on
// (a CPU session runs both synchronously); counts the chained steps launched.
class Source : public SessionLogitsSource {
 public:
  Source(WhisperSession& s, bool chain) : SessionLogitsSource(s), chain_(chain) {}
  bool chooses_on_device() const override { return true; }
  bool chains_beam() const override { return chain_; }
  void beam_chain_launch() override {
    ++launched;
    SessionLogitsSource::beam_chain_launch();
  }
  int launched = 0;

 private:
  bool chain_;
};

DecodingOptions beam(int size) {
  DecodingOptions o;
  o.beam_size = size;
  return o;
}

TEST(BeamChain, WindowsDecodeAsStepByStep) {
  if (!have_tiny_en()) GTEST_SKIP() << "no tiny.en model at " << model_dir();
  const auto model = WhisperModel::load(model_dir());
  const WhisperTokenizer tok = load_tokenizer(*model);
  const std::string no_eot = "-1," + std::to_string(tok.eot());
  std::vector<DecodingOptions> cases = {beam(5), beam(1), beam(2), beam(6), beam(3),
                                        beam(5), beam(4), beam(5), beam(2)};
  cases[3].patience = 2.0f;  // ten finished sequences end the search
  cases[4].without_timestamps = true;
  cases[5].prompt = tok.encode(" And so my fellow Americans.");
  cases[5].suppress_blank = false;
  cases[6].sample_len = 7;            // ends at the length limit, mid-sentence
  cases[7].suppress_tokens = no_eot;  // never finishes: runs to sample_len (224)
  cases[7].sample_len = 40;
  cases[7].length_penalty = 0.5f;
  // A prompt of 223 tokens and no <|endoftext|>: the context (448) ends the window.
  for (int i = 0; i < 223; ++i) cases[8].prompt.push_back(int32_t(1000 + i));
  cases[8].sample_len = 300;
  cases[8].suppress_tokens = no_eot;
  cases[8].without_timestamps = true;
  WhisperSession session(model);
  session.encode(jfk_window());
  for (size_t i = 0; i < cases.size(); ++i) {
    SCOPED_TRACE("case " + std::to_string(i));
    DecodingResult results[2];
    std::vector<float> no_speech[2];
    int launched = 0;
    for (int chain : {0, 1}) {
      Source source(session, chain == 1);
      DecodingOptions o = cases[i];
      o.on_no_speech_prob = [&](float p) { no_speech[chain].push_back(p); };
      results[chain] = decode_encoded(source, tok, o);
      if (chain == 1) launched = source.launched;
    }
    const DecodingResult &want = results[0], &got = results[1];
    EXPECT_EQ(got.tokens, want.tokens);
    EXPECT_EQ(got.text, want.text);
    EXPECT_EQ(got.avg_logprob, want.avg_logprob);
    EXPECT_EQ(got.no_speech_prob, want.no_speech_prob);
    EXPECT_EQ(got.compression_ratio, want.compression_ratio);
    EXPECT_EQ(no_speech[1], no_speech[0]);
    if (cases[i].beam_size > 1)
      EXPECT_GT(launched, 0);  // the chain ran
    else
      EXPECT_EQ(launched, 0);  // one beam has no rows to chain
    const size_t n = want.tokens.size();
    switch (i) {
      case 6: EXPECT_LE(n, 7u); break;
      case 7: EXPECT_EQ(n, 40u); break;
      case 8: EXPECT_EQ(n, 448u - 226u + 1u); break;  // 226 initial tokens
      default: EXPECT_GT(n, 10u);
    }
  }
}

// Cancelled between chained steps: Error(cancelled), and the next window on the session
// decodes as before.
TEST(BeamChain, CancelledMidWindow) {
  if (!have_tiny_en()) GTEST_SKIP() << "no tiny.en model at " << model_dir();
  const auto model = WhisperModel::load(model_dir());
  const WhisperTokenizer tok = load_tokenizer(*model);
  WhisperSession session(model);
  session.encode(jfk_window());
  Source chain(session, true), step(session, false);
  const DecodingResult want = decode_encoded(step, tok, beam(5));
  DecodingOptions o = beam(5);
  int polls = 0;
  o.cancelled = [&] { return ++polls > 6; };
  try {
    decode_encoded(chain, tok, o);
    FAIL() << "expected Error(cancelled)";
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), ErrorKind::cancelled);
  }
  EXPECT_GT(chain.launched, 0);
  const DecodingResult again = decode_encoded(chain, tok, beam(5));
  EXPECT_EQ(again.tokens, want.tokens);
  EXPECT_EQ(again.avg_logprob, want.avg_logprob);
}

// The session's beam chain refuses what it cannot follow: no rows, a start of another size,
// rows steps while the chain owns the rows; beam_chain_end ends the rows and keeps the
// shared cache.
TEST(BeamChain, SessionMisuseIsAnError) {
  if (!have_tiny_en()) GTEST_SKIP() << "no tiny.en model at " << model_dir();
  const auto model = WhisperModel::load(model_dir());
  const WhisperTokenizer tok = load_tokenizer(*model);
  WhisperSession session(model);
  session.encode(jfk_window());
  BeamChainStart start;
  start.tokens = {tok.timestamp_begin(), tok.timestamp_begin() + 1};
  start.rules.assign(2 * kRuleWidth, 0);
  start.states.assign(2 * 3, -1);
  start.sums = {0.0f, 0.0f};
  start.max_finished = 2;
  start.grammar = {tok.eot(), tok.timestamp_begin()};
  EXPECT_THROW(session.beam_chain_begin(start), Error);  // no rows
  const std::vector<int32_t> initial = {tok.sot(), tok.timestamp_begin()};
  session.decode(initial);
  session.fork(3);
  EXPECT_THROW(session.beam_chain_begin(start), Error);  // 2 rows' start for 3 rows
  session.reset();
  session.decode(initial);
  session.fork(2);
  session.beam_chain_begin(start);
  EXPECT_THROW(session.beam_chain_begin(start), Error);  // already running
  const std::vector<int32_t> two = {1, 2};
  EXPECT_THROW(session.decode_rows(two), Error);
  EXPECT_THROW(session.reorder_rows(std::vector<int32_t>{0, 0}), Error);
  session.beam_chain_launch();
  const BeamStepRecord& r = session.beam_chain_result(2);
  EXPECT_EQ(r.source.size(), 2u);
  EXPECT_THROW(session.beam_chain_result(3), Error);  // not launched
  session.beam_chain_end();
  EXPECT_EQ(session.n_cached(), 2);
  EXPECT_EQ(session.n_rows(), 0);
  EXPECT_THROW(session.beam_chain_launch(), Error);
  EXPECT_THROW(session.beam_chain_initial_logits(), Error);  // no chain

  // From an initial pass: the start is one row, whose token is the last initial token.
  session.reset();
  EXPECT_THROW(session.beam_chain_begin_initial(initial, 0, 2, start), Error);  // two rows
  BeamChainStart one = start;
  one.tokens = {initial.back()};
  one.rules.resize(kRuleWidth);
  one.states.resize(3);
  one.sums = {0.0f};
  EXPECT_THROW(session.beam_chain_begin_initial(initial, 0, 40, one), Error);  // > 31 rows
  session.beam_chain_begin_initial(initial, 0, 3, one);
  EXPECT_EQ(session.n_rows(), 3);
  EXPECT_EQ(session.n_cached(), 2);
  EXPECT_EQ(session.beam_chain_initial_logits().size(), size_t(tok.n_vocab()));
  const BeamStepRecord& first = session.beam_chain_result(1);  // the pass's last position
  EXPECT_EQ(first.source, (std::vector<int32_t>{0, 0, 0}));    // one sequence
  EXPECT_THROW(session.beam_chain_begin_initial(initial, 0, 3, one), Error);  // running
  session.beam_chain_end();
  EXPECT_EQ(session.n_cached(), 2);
}

}  // namespace
}  // namespace parley

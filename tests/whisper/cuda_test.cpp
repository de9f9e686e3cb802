// The Whisper forward on CUDA against the CPU parity path (the oracle): the same greedy
// tokens in f32 on the real tiny.en (jfk.wav) and a synthetic multilingual tiny. f16 and
// bf16 (the fast path): on tiny.en free-running greedy within two token edits; on the
// synthetic model, whose random weights leave near-ties (top-2 margins of 0.1) that one
// 16-bit rounding flips and greedy then follows another path entirely, teacher-forced on
// the oracle's tokens: the steps whose argmax differs, at most two more than the CPU in
// the same dtype gets (its sharp cross-attention, logit std 16 by design, amplifies 16-bit
// rounding). Skipped without CUDA.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <functional>
#include <iostream>
#include <memory>
#include <string>
#include <vector>

#include <unistd.h>

#include "audio/decode.h"
#include "audio/mel.h"
#include "engine/device.h"
#include "whisper/batch_session.h"
#include "whisper/decoding.h"
#include "whisper/encoder_graph.h"
#include "whisper/logit_filters.h"
#include "whisper/model.h"
#include "whisper/synth.h"
#include "whisper/transcribe.h"
#include "whisper/transcribe_batch.h"
#include "whisper/whisper_test_util.h"

namespace parley {
namespace {

using whisper_test::jfk_window;

namespace fs = std::filesystem;

const std::string kModelDir = PARLEY_TEST_MODEL_DIR;
const std::string kData = PARLEY_TEST_DATA;

#define REQUIRE_CUDA() \
  if (!cuda_available()) GTEST_SKIP() << "no CUDA device"
#define REQUIRE_TINY_EN() \
  if (!fs::exists(fs::path(kModelDir) / "model.bin")) GTEST_SKIP() << "no model at " << kModelDir

// tiny.en's <|startoftranscript|><|notimestamps|>, and the first tokens of its jfk transcript
// (the steps the graph tests force).
const std::vector<int32_t> kJfkPrefix = {50257, 50362};
const std::vector<int32_t> kJfkForced = {843, 523, 616, 5891, 3399, 1265, 407, 644, 534, 1499};

struct Greedy {
  std::vector<int32_t> tokens;
  std::vector<float> margins;  // per token: its logit minus the runner-up's
  Tensor first_logits;         // f32 [1, n_vocab] of the prefix's last position, on the CPU
};

// Greedy decoding (raw argmax, no filters) after `prefix`, up to `max_tokens` or eot.
Greedy greedy(std::shared_ptr<const WhisperModel> model, const Tensor& mel,
              const std::vector<int32_t>& prefix, int32_t eot, int max_tokens) {
  WhisperSession session(std::move(model));
  session.encode(mel);
  Greedy g;
  Tensor logits = session.decode(prefix);
  const int64_t v = logits.dim(1);
  g.first_logits = Tensor::empty({1, v}, DType::f32);
  std::copy_n(logits.data<float>() + (logits.dim(0) - 1) * v, v, g.first_logits.data<float>());
  while (int(g.tokens.size()) < max_tokens) {
    const float* last = logits.data<float>() + (logits.dim(0) - 1) * v;
    const auto token = int32_t(std::max_element(last, last + v) - last);
    float second = -INFINITY;
    for (int64_t j = 0; j < v; ++j)
      if (j != token) second = std::max(second, last[j]);
    g.tokens.push_back(token);
    g.margins.push_back(last[token] - second);
    if (token == eot) break;
    logits = session.decode(std::span<const int32_t>(&token, 1));
  }
  return g;
}

// Feeds the oracle's tokens and counts the steps whose argmax differs from them.
int forced_disagreements(std::shared_ptr<const WhisperModel> model, const Tensor& mel,
                         const std::vector<int32_t>& prefix, const std::vector<int32_t>& tokens) {
  WhisperSession session(std::move(model));
  session.encode(mel);
  Tensor logits = session.decode(prefix);
  int differ = 0;
  for (size_t i = 0; i < tokens.size(); ++i) {
    const int64_t v = logits.dim(1);
    const float* last = logits.data<float>() + (logits.dim(0) - 1) * v;
    differ += int32_t(std::max_element(last, last + v) - last) != tokens[i];
    if (i + 1 < tokens.size()) logits = session.decode(std::span<const int32_t>(&tokens[i], 1));
  }
  return differ;
}

// Levenshtein distance: insertions, deletions and substitutions of tokens.
int edit_distance(const std::vector<int32_t>& a, const std::vector<int32_t>& b) {
  std::vector<int> prev(b.size() + 1), cur(b.size() + 1);
  for (size_t j = 0; j <= b.size(); ++j) prev[j] = int(j);
  for (size_t i = 1; i <= a.size(); ++i) {
    cur[0] = int(i);
    for (size_t j = 1; j <= b.size(); ++j)
      cur[j] = std::min({prev[j] + 1, cur[j - 1] + 1, prev[j - 1] + (a[i - 1] != b[j - 1])});
    std::swap(prev, cur);
  }
  return prev[b.size()];
}

float max_abs(const Tensor& t) {
  float m = 0;
  for (int64_t i = 0; i < t.numel(); ++i) m = std::max(m, std::abs(t.data<float>()[i]));
  return m;
}

float max_abs_diff(const Tensor& a, const Tensor& b) {
  float m = 0;
  for (int64_t i = 0; i < a.numel(); ++i)
    m = std::max(m, std::abs(a.data<float>()[i] - b.data<float>()[i]));
  return m;
}

// Runs the CPU f32 oracle, then CUDA in f32 (identical tokens, logits within 1e-3 of the
// largest) and in f16 / bf16 (two token edits, or two teacher-forced disagreements).
void check_against_cpu(const std::string& dir, const Tensor& mel,
                       const std::vector<int32_t>& prefix, int32_t eot, int max_tokens,
                       bool teacher_forced_16bit) {
  const Greedy ref = greedy(WhisperModel::load(dir), mel, prefix, eot, max_tokens);
  ASSERT_GE(ref.tokens.size(), 5u) << "the oracle decoded too little to compare";
  {
    const Greedy f32 =
        greedy(WhisperModel::load(dir, {Device::cuda, DType::f32}), mel, prefix, eot, max_tokens);
    EXPECT_EQ(f32.tokens, ref.tokens) << "cuda f32";
    const float scale = max_abs(ref.first_logits);
    EXPECT_LE(max_abs_diff(f32.first_logits, ref.first_logits), 1e-3f * scale) << "cuda f32";
  }
  for (DType dt : {DType::f16, DType::bf16}) {
    const auto model = WhisperModel::load(dir, {Device::cuda, dt});
    const Greedy low = greedy(model, mel, prefix, eot, max_tokens);
    if (teacher_forced_16bit) {
      // The CPU in the same dtype says how many near-ties 16-bit activations flip on
      // these weights at all; CUDA may add at most two to that.
      const int differ = forced_disagreements(model, mel, prefix, ref.tokens);
      const int cpu_differ =
          forced_disagreements(WhisperModel::load(dir, {Device::cpu, dt}), mel, prefix, ref.tokens);
      EXPECT_LE(differ, std::max(2, cpu_differ + 2))
          << "cuda " << dtype_name(dt) << ": " << differ << " of " << ref.tokens.size()
          << " teacher-forced steps differ (cpu " << dtype_name(dt) << ": " << cpu_differ << ")";
      std::cout << "[ info ] teacher-forced disagreements with cpu f32, " << dtype_name(dt)
                << ": cuda " << differ << ", cpu " << cpu_differ << " of " << ref.tokens.size()
                << "\n";
    } else {
      const int edits = edit_distance(low.tokens, ref.tokens);
      size_t first = 0;
      while (first < low.tokens.size() && first < ref.tokens.size() &&
             low.tokens[first] == ref.tokens[first])
        ++first;
      EXPECT_LE(edits, 2) << "cuda " << dtype_name(dt) << ": " << edits << " token edits over "
                          << ref.tokens.size() << " tokens; first difference at " << first
                          << " where the oracle's top-2 margin is "
                          << (first < ref.margins.size() ? ref.margins[first] : -1.0f);
    }
    const float scale = max_abs(ref.first_logits);
    EXPECT_LE(max_abs_diff(low.first_logits, ref.first_logits), 0.1f * scale)
        << "cuda " << dtype_name(dt);
  }
}

TEST(WhisperCuda, TinyEnJfkMatchesCpu) {
  REQUIRE_CUDA();
  REQUIRE_TINY_EN();
  constexpr int32_t kSot = 50257, kNoTimestamps = 50362, kEot = 50256;
  check_against_cpu(kModelDir, jfk_window(80), {kSot, kNoTimestamps}, kEot, 40, false);
}

// A synthetic multilingual tiny (parley synth) in a temporary folder, removed with the object.
struct SynthTiny {
  explicit SynthTiny(const std::string& name, uint64_t seed)
      : dir(fs::temp_directory_path() / (name + "_" + std::to_string(::getpid()))) {
    fs::remove_all(dir);
    SynthOptions o;
    o.shape = "tiny";
    o.seed = seed;
    o.vocab_path = kData + "/whisper/multilingual.tiktoken";
    write_synth_whisper(o, dir.string());
  }
  ~SynthTiny() { fs::remove_all(dir); }
  SynthTiny(const SynthTiny&) = delete;
  SynthTiny& operator=(const SynthTiny&) = delete;
  fs::path dir;
};

// A second window's mel: `mel` rescaled (other audio features, same offsets).
Tensor second_window(const Tensor& mel) {
  Tensor out = Tensor::empty(mel.shape(), DType::f32);
  for (int64_t i = 0; i < mel.numel(); ++i)
    out.data<float>()[i] = 0.8f * mel.data<float>()[i] - 0.1f;
  return out;
}

TEST(WhisperCuda, SyntheticTinyMatchesCpu) {
  REQUIRE_CUDA();
  const SynthTiny synth("parley_cuda_synth", 0);
  const std::string dir = synth.dir.string();
  const auto model = WhisperModel::load(dir);
  const WhisperTokenizer tok = load_tokenizer(*model);
  const std::vector<int32_t> prefix =
      initial_tokens(tok, DecodingOptions{}, "en", model->config().n_text_ctx);
  check_against_cpu(dir, jfk_window(model->config().n_mels), prefix, tok.eot(), 60, true);
}

// WhisperBatchSession::encode's n_ctx on the GPU: short windows (500 and 750 positions)
// beside a full one, scattered into their slots and cross-attended under the audio mask,
// give the CPU batch's logits, teacher-forced over a prefill and five steps (f32 within 1e-3
// of the largest logit, f16 within 0.1, as check_against_cpu).
TEST(WhisperCuda, ShortWindowsInABatchMatchCpu) {
  REQUIRE_CUDA();
  const SynthTiny synth("parley_cuda_short", 0);
  const std::string dir = synth.dir.string();
  const auto cpu_model = WhisperModel::load(dir);
  const int64_t n_mels = cpu_model->config().n_mels;
  const Tensor mel = jfk_window(int(n_mels));
  Tensor mels = Tensor::empty({2, n_mels, kChunkFrames}, DType::f32);
  mels.slice0(0, 1).reshape({n_mels, kChunkFrames}).copy_from(mel);
  mels.slice0(1, 2).reshape({n_mels, kChunkFrames}).copy_from(second_window(mel));
  const std::vector<int32_t> slots = {0, 1, 2}, sot = {50258, 50259, 50359};
  const auto run = [&](const std::shared_ptr<const WhisperModel>& model) {
    WhisperBatchSession batch(model, 3);
    batch.encode(std::vector<int32_t>{2, 0}, mels, 500);  // two short windows, one call
    batch.encode(std::vector<int32_t>{1}, mels.slice0(0, 1));
    EXPECT_EQ(batch.audio_ctx(0), 500);
    EXPECT_EQ(batch.audio_ctx(1), 1500);
    std::vector<int32_t> tokens;
    for (int i = 0; i < 3; ++i) tokens.insert(tokens.end(), sot.begin(), sot.end());
    std::vector<Tensor> out = {batch.prefill_batch(slots, tokens)};
    for (int k = 0; k < 5; ++k)
      out.push_back(batch.step(
          slots, std::vector<int32_t>{int32_t(400 + k), int32_t(500 + k), int32_t(600 + k)}));
    return out;
  };
  const std::vector<Tensor> want = run(cpu_model);
  for (const DType dt : {DType::f32, DType::f16}) {
    const std::vector<Tensor> got = run(WhisperModel::load(dir, {Device::cuda, dt}));
    for (size_t i = 0; i < want.size(); ++i) {
      const float scale = max_abs(want[i]);
      EXPECT_LE(max_abs_diff(got[i], want[i]), (dt == DType::f32 ? 1e-3f : 0.1f) * scale)
          << dtype_name(dt) << " pass " << i;
    }
  }
}

// The batch session's steps on CUDA replay a graph per row count (batch_session.h): rows in
// slots of any order and subset, short and full windows, steps replayed many times, against
// the same steps with PARLEY_CUDA_GRAPHS=0 (every step eager), logits within 1e-3 of scale.
TEST(WhisperCuda, BatchStepGraphsMatchEagerSteps) {
  REQUIRE_CUDA();
  const SynthTiny synth("parley_cuda_batch_graphs", 0);
  const auto model = WhisperModel::load(synth.dir.string(), {Device::cuda, DType::f16});
  const int64_t n_mels = model->config().n_mels;
  const Tensor mel = jfk_window(int(n_mels));
  Tensor mels = Tensor::empty({2, n_mels, kChunkFrames}, DType::f32);
  mels.slice0(0, 1).reshape({n_mels, kChunkFrames}).copy_from(mel);
  mels.slice0(1, 2).reshape({n_mels, kChunkFrames}).copy_from(second_window(mel));
  const std::vector<int32_t> sot = {50258, 50259, 50359};
  const std::vector<std::vector<int32_t>> plan = {
      {3, 0, 2}, {3, 0, 2},    {3, 0, 2},    {3, 0, 2},    {1, 3},   {1, 3},
      {1, 3},    {0, 1, 2, 3}, {0, 1, 2, 3}, {0, 1, 2, 3}, {2, 0, 3}};
  const auto run = [&](bool graphs) {
    if (!graphs) ::setenv("PARLEY_CUDA_GRAPHS", "0", 1);
    WhisperBatchSession batch(model, 4);
    batch.encode(std::vector<int32_t>{2, 0}, mels, 500);  // two short windows
    batch.encode(std::vector<int32_t>{1, 3}, mels);       // two full ones
    std::vector<int32_t> tokens;
    for (int i = 0; i < 4; ++i) tokens.insert(tokens.end(), sot.begin(), sot.end());
    batch.prefill_batch(std::vector<int32_t>{0, 1, 2, 3}, tokens);
    std::vector<Tensor> out;
    int k = 0;
    for (const auto& slots : plan) {
      std::vector<int32_t> step_tokens;
      for (int32_t s : slots) step_tokens.push_back(int32_t(400 + 7 * k + 50 * s));
      out.push_back(batch.step(slots, step_tokens));
      ++k;
    }
    ::unsetenv("PARLEY_CUDA_GRAPHS");
    return out;
  };
  const std::vector<Tensor> want = run(false), got = run(true);
  for (size_t i = 0; i < want.size(); ++i) {
    const float scale = max_abs(want[i]);
    EXPECT_LE(max_abs_diff(got[i], want[i]), 1e-3f * scale) << "step " << i;
  }
}

// A session whose decoder steps all run eagerly: made while PARLEY_CUDA_GRAPHS=0, which
// DecodeGraphs::enabled reads when a session is made (the graphs' reference).
std::unique_ptr<WhisperSession> session_without_graphs(
    const std::shared_ptr<const WhisperModel>& model) {
  ::setenv("PARLEY_CUDA_GRAPHS", "0", 1);
  auto session = std::make_unique<WhisperSession>(model);
  ::unsetenv("PARLEY_CUDA_GRAPHS");
  return session;
}

// tiny.en in f16 on CUDA with two sessions: `graphed` replays decoder-step graphs, `eager`
// runs every step eagerly (the reference).
struct GraphSessions {
  std::shared_ptr<const WhisperModel> model;
  std::unique_ptr<WhisperSession> eager, graphed;
};
GraphSessions graph_sessions() {
  GraphSessions s;
  s.model = WhisperModel::load(kModelDir, {Device::cuda, DType::f16});
  s.eager = session_without_graphs(s.model);
  s.graphed = std::make_unique<WhisperSession>(s.model);
  return s;
}

// Single-token steps on CUDA replay captured graphs from the second visit of an offset on
// (decode_graphs.h): teacher-forced logits of a replayed pass against a session without
// graphs (PARLEY_CUDA_GRAPHS=0), step by step, after a reset and after a new window.
TEST(WhisperCuda, GraphReplayMatchesEagerSteps) {
  REQUIRE_CUDA();
  REQUIRE_TINY_EN();
  const GraphSessions sessions = graph_sessions();
  WhisperSession &eager = *sessions.eager, &graphed = *sessions.graphed;
  const Tensor mel = jfk_window(80);
  const std::vector<int32_t>& prefix = kJfkPrefix;
  const std::vector<int32_t>& forced = kJfkForced;
  auto run = [&](WhisperSession& s) {
    std::vector<Tensor> rows;
    s.reset();
    rows.push_back(s.decode(prefix));
    for (int32_t tok : forced) rows.push_back(s.decode(std::span<const int32_t>(&tok, 1)));
    return rows;
  };
  const Tensor mel2 = second_window(mel);
  graphed.encode(mel);
  run(graphed);  // first visits: eager steps, each then captured
  for (const Tensor* window : {&mel, static_cast<const Tensor*>(&mel2)}) {
    eager.encode(*window);
    graphed.encode(*window);
    const std::vector<Tensor> want = run(eager);
    const std::vector<Tensor> got = run(graphed);  // replays
    for (size_t i = 1; i < want.size(); ++i) {
      const float scale = max_abs(want[i]);
      EXPECT_LE(max_abs_diff(got[i], want[i]), 1e-3f * scale)
          << "step " << i << (window == &mel ? " (first window)" : " (second window)");
    }
  }
}

// A session's encoder pass on CUDA is eager the first time, captured into a graph and
// launched the second, replayed after (encoder_graph.h): every pass's features equal those of
// a session without graphs bit for bit, and so do the decoder's logits over its
// cross-attention K/V (to 1e-5), for two windows in turn and a mel that starts on the device.
// A synthetic tiny in f16 (no download needed).
TEST(WhisperCuda, EncoderGraphMatchesEagerPass) {
  REQUIRE_CUDA();
  if (!whisper::EncoderGraph::enabled()) GTEST_SKIP() << "encoder graphs are off";
  const SynthTiny synth("parley_encoder_graph", 3);
  const auto model = WhisperModel::load(synth.dir.string(), {Device::cuda, DType::f16});
  const std::vector<int32_t> prefix =
      initial_tokens(load_tokenizer(*model), DecodingOptions{}, "en", model->config().n_text_ctx);
  const std::unique_ptr<WhisperSession> eager = session_without_graphs(model);
  WhisperSession graphed(model);
  const Tensor mel = jfk_window(model->config().n_mels), mel2 = second_window(mel);
  const Tensor mel_on_device = mel2.to(Device::cuda);
  const uint64_t launches = whisper_run_counters().encoder_graph_launches;
  int pass = 0;
  for (const Tensor* window : {&mel, &mel2, &mel, &mel_on_device, &mel}) {
    SCOPED_TRACE("pass " + std::to_string(pass));
    eager->encode(*window);
    graphed.encode(*window);
    const Tensor want = eager->audio_features().to(Device::cpu);
    const Tensor got = graphed.audio_features().to(Device::cpu);
    ASSERT_EQ(std::memcmp(want.raw(), got.raw(), want.nbytes()), 0);
    eager->reset();
    graphed.reset();
    const Tensor want_logits = eager->decode(prefix);
    const Tensor got_logits = graphed.decode(prefix);
    EXPECT_LE(max_abs_diff(got_logits, want_logits), 1e-5f * max_abs(want_logits));
    // Passes 1 (captured) to 4 (replays) launched the graph; pass 0 ran eagerly.
    EXPECT_EQ(whisper_run_counters().encoder_graph_launches - launches, uint64_t(pass));
    ++pass;
  }
}

// Rows steps on CUDA replay graphs keyed by (offset, rows, k) (decode_graphs.h), reading the
// rows' slots from the device: scripted steps of three rows, with the choice (k = 4) and
// without it (decode_rows' logits), against a session without graphs, first capturing, then
// replayed after other reorders (a row whose K/V went to the slot of the captured step
// would read another row's keys from then on).
TEST(WhisperCuda, RowsGraphReplayFollowsReorders) {
  REQUIRE_CUDA();
  REQUIRE_TINY_EN();
  const GraphSessions sessions = graph_sessions();
  WhisperSession &eager = *sessions.eager, &graphed = *sessions.graphed;
  const Tensor mel = jfk_window(80);
  eager.encode(mel);
  graphed.encode(mel);
  const std::vector<int32_t>& prefix = kJfkPrefix;
  const std::vector<int32_t>& forced = kJfkForced;
  constexpr int kRows = 3, kTop = 4, kSteps = 9;
  const std::vector<int32_t> rules(size_t(kRows * kRuleWidth), 0);  // no rule: plain top k
  struct Step {
    std::vector<int32_t> ids;
    std::vector<float> logprobs;
    Tensor logits;  // every third step: decode_rows
  };
  // sources[i]: the reorder after step i.
  auto run = [&](WhisperSession& s, const std::vector<std::vector<int32_t>>& sources) {
    std::vector<Step> steps;
    s.reset();
    s.decode(prefix);
    s.fork(kRows);
    for (int i = 0; i < kSteps; ++i) {
      std::vector<int32_t> tokens(kRows);
      for (int r = 0; r < kRows; ++r) tokens[size_t(r)] = forced[size_t(i + 3 * r) % forced.size()];
      Step st;
      if (i % 3 == 2) {
        st.logits = s.decode_rows(tokens);
      } else {
        const WhisperSession::Choices& c = s.decode_choose(tokens, {}, rules, kTop);
        st.ids = c.ids;
        st.logprobs = c.logprobs;
      }
      steps.push_back(std::move(st));
      s.reorder_rows(sources[size_t(i) % sources.size()]);
    }
    return steps;
  };
  const std::vector<std::vector<int32_t>> capture = {{0, 1, 2}, {1, 1, 0}, {2, 0, 2}};
  const std::vector<std::vector<int32_t>> replay = {{2, 2, 1}, {0, 2, 1}, {1, 0, 0}, {0, 0, 0}};
  run(graphed, capture);
  const std::vector<Step> want = run(eager, replay), got = run(graphed, replay);
  for (size_t i = 0; i < want.size(); ++i) {
    if (i % 3 == 2) {  // a decode_rows step (a default Tensor is a scalar: numel() is 1)
      EXPECT_LE(max_abs_diff(got[i].logits, want[i].logits), 1e-3f * max_abs(want[i].logits))
          << "step " << i;
      continue;
    }
    EXPECT_EQ(got[i].ids, want[i].ids) << "step " << i;
    ASSERT_EQ(got[i].logprobs.size(), want[i].logprobs.size());
    for (size_t j = 0; j < want[i].logprobs.size(); ++j)
      EXPECT_NEAR(got[i].logprobs[j], want[i].logprobs[j], 1e-3f) << "step " << i << " " << j;
  }
}

// Whole windows with beam search (rows steps with the choice) and best_of sampling (rows
// steps returning logits) decode with graphs as without: the first window captures, the
// second (other audio, so other reorders) replays.
TEST(WhisperCuda, BeamGraphsDecodeAsWithoutGraphs) {
  REQUIRE_CUDA();
  REQUIRE_TINY_EN();
  const GraphSessions sessions = graph_sessions();
  WhisperSession &eager = *sessions.eager, &graphed = *sessions.graphed;
  const WhisperTokenizer tok = load_tokenizer(*sessions.model);
  const Tensor mel = jfk_window(80);
  const Tensor mel2 = second_window(mel);
  std::vector<DecodingOptions> cases(2);
  cases[0].beam_size = 5;
  cases[1].temperature = 0.5f;
  cases[1].best_of = 3;
  cases[1].seed = 7;
  for (const DecodingOptions& o : cases) decode_window(graphed, tok, mel, o);  // captures
  for (const Tensor* window : {&mel, &mel2}) {
    for (size_t i = 0; i < cases.size(); ++i) {
      SCOPED_TRACE("case " + std::to_string(i) + (window == &mel ? ", first window" : ", second"));
      const DecodingResult want = decode_window(eager, tok, *window, cases[i]);
      const DecodingResult got = decode_window(graphed, tok, *window, cases[i]);
      ASSERT_GT(want.tokens.size(), 5u);
      EXPECT_EQ(got.tokens, want.tokens);
      EXPECT_NEAR(got.avg_logprob, want.avg_logprob, 1e-4);
    }
  }
}

// The share of values with any of the low 13 mantissa bits set: 0 for logits that went
// through f16, nearly 1 for f32 GEMM output.
double share_beyond_f16(const Tensor& t) {
  int64_t n = 0;
  for (int64_t i = 0; i < t.numel(); ++i) {
    uint32_t bits;
    std::memcpy(&bits, t.data<float>() + i, sizeof(bits));
    n += (bits & 0x1fffu) != 0;
  }
  return double(n) / double(t.numel());
}

// An f16 model on CUDA: decode, decode_rows (attention_tokens per beam row over its slot)
// and the alignment pass give f32 logits (not rounded to f16) close to the CPU f32 ones of
// the same sequences.
TEST(WhisperCuda, F16RowsAndAlignmentLogitsMatchCpu) {
  REQUIRE_CUDA();
  REQUIRE_TINY_EN();
  const Tensor mel = jfk_window(80);
  WhisperSession gpu(WhisperModel::load(kModelDir, {Device::cuda, DType::f16}));
  WhisperSession cpu(WhisperModel::load(kModelDir));
  gpu.encode(mel);
  cpu.encode(mel);
  const std::vector<int32_t>& prefix = kJfkPrefix;
  const std::vector<int32_t> step = {843, 523};
  gpu.decode(prefix);
  gpu.fork(2);
  const Tensor rows = gpu.decode_rows(step);  // [2, V]
  EXPECT_GT(share_beyond_f16(rows), 0.9);
  const int64_t v = rows.dim(1);
  for (int64_t r = 0; r < 2; ++r) {
    cpu.reset();
    const Tensor want = cpu.decode(std::vector<int32_t>{prefix[0], prefix[1], step[size_t(r)]});
    const Tensor want_last = want.slice0(2, 3), got = rows.slice0(r, r + 1);
    EXPECT_LE(max_abs_diff(got, want_last), 0.05f * max_abs(want_last)) << "row " << r;
    EXPECT_EQ(got.numel(), v);
  }
  const std::vector<int32_t> seq = {prefix[0], prefix[1], step[0]};
  const std::pair<int, int> heads[] = {{2, 1}};
  const CrossAttentionWeights got = gpu.cross_attention_weights(seq, heads);
  const CrossAttentionWeights want = cpu.cross_attention_weights(seq, heads);
  EXPECT_GT(share_beyond_f16(got.logits), 0.9);
  EXPECT_LE(max_abs_diff(got.logits, want.logits), 0.05f * max_abs(want.logits));
  EXPECT_LE(max_abs_diff(got.qk, want.qk), 0.05f * max_abs(want.qk));
}

// The encoder output itself, f32 on both sides.
TEST(WhisperCuda, EncoderF32MatchesCpu) {
  REQUIRE_CUDA();
  REQUIRE_TINY_EN();
  const Tensor mel = jfk_window(80);
  WhisperSession cpu(WhisperModel::load(kModelDir));
  WhisperSession gpu(WhisperModel::load(kModelDir, {Device::cuda, DType::f32}));
  cpu.encode(mel);
  gpu.encode(mel);
  const Tensor a = cpu.audio_features(), b = gpu.audio_features().to(Device::cpu);
  EXPECT_LE(max_abs_diff(a, b), 1e-3f * max_abs(a));
}

// transcribe() on a CUDA session computes the log-mel on the GPU (mel_device.h) and cuts
// its windows there; in f32 the transcript must equal the CPU parity path's, whose mel is
// kissfft's. jfk.wav three times (33 s) needs a second window, cut at a seek > 0.
TEST(WhisperCuda, TranscribeWithGpuMelMatchesCpu) {
  REQUIRE_CUDA();
  REQUIRE_TINY_EN();
  const auto cpu_model = WhisperModel::load(kModelDir);
  const auto gpu_model = WhisperModel::load(kModelDir, {Device::cuda, DType::f32});
  const WhisperTokenizer tok = load_tokenizer(*cpu_model);
  std::vector<float> jfk = load_audio(kData + "/audio/jfk.wav");
  std::vector<float> thrice;
  for (int i = 0; i < 3; ++i) thrice.insert(thrice.end(), jfk.begin(), jfk.end());
  TranscribeOptions o;
  o.temperatures = {0.0f};
  for (const std::vector<float>* audio : {&jfk, &thrice}) {
    WhisperSession cpu(cpu_model), gpu(gpu_model);
    const TranscribeResult want = transcribe(cpu, tok, *audio, o);
    const TranscribeResult got = transcribe(gpu, tok, *audio, o);
    EXPECT_EQ(got.text, want.text);
    ASSERT_EQ(got.segments.size(), want.segments.size());
    if (audio == &thrice) {
      EXPECT_GT(got.segments.back().seek, 0);
    }
    for (size_t i = 0; i < want.segments.size(); ++i) {
      EXPECT_EQ(got.segments[i].tokens, want.segments[i].tokens) << "segment " << i;
      EXPECT_EQ(got.segments[i].seek, want.segments[i].seek) << "segment " << i;
    }
    std::cout << "[ info ] cuda f32 transcript (" << audio->size() << " samples): " << got.text
              << "\n";
  }
}

}  // namespace
}  // namespace parley

namespace parley {
namespace {

// transcribe_batch on CUDA (batched encoder, batched decoder steps, GPU mel, windows cut on
// the device) against the CPU parity path's transcribe() of each file alone: in f32 the same
// segments and tokens; in f16 the same text on these clean clips.
TEST(WhisperCuda, TranscribeBatchMatchesCpuPerFile) {
  REQUIRE_CUDA();
  REQUIRE_TINY_EN();
  const auto cpu_model = WhisperModel::load(kModelDir);
  const WhisperTokenizer tok = load_tokenizer(*cpu_model);
  std::vector<std::vector<float>> samples;
  // WAV only: the GPU machine's build may lack FFmpeg. jfk three times: a window at seek > 0.
  for (const char* name : {"jfk.wav", "silero_test.wav"})
    samples.push_back(load_audio(kData + "/audio/" + name));
  std::vector<float> thrice;
  for (int i = 0; i < 3; ++i) thrice.insert(thrice.end(), samples[0].begin(), samples[0].end());
  samples.push_back(std::move(thrice));
  samples.push_back(std::vector<float>(16000 * 5, 0.0f));  // silence
  TranscribeOptions o;
  o.temperatures = {0.0f};
  std::vector<TranscribeResult> want;
  WhisperSession cpu(cpu_model);
  for (const auto& s : samples) want.push_back(transcribe(cpu, tok, s, o));
  for (const DType dt : {DType::f32, DType::f16}) {
    const auto gpu_model = WhisperModel::load(kModelDir, {Device::cuda, dt});
    WhisperBatchSession batch(gpu_model, 3);
    WhisperSession fallback(gpu_model);
    const auto got = transcribe_batch(batch, fallback, tok, samples, o);
    ASSERT_EQ(got.size(), want.size());
    for (size_t f = 0; f < want.size(); ++f) {
      EXPECT_EQ(got[f].text, want[f].text) << "file " << f << " " << dtype_name(dt);
      if (dt != DType::f32) continue;
      ASSERT_EQ(got[f].segments.size(), want[f].segments.size()) << "file " << f;
      for (size_t i = 0; i < want[f].segments.size(); ++i)
        EXPECT_EQ(got[f].segments[i].tokens, want[f].segments[i].tokens) << "file " << f;
    }
  }
}

}  // namespace
}  // namespace parley

namespace parley {
namespace {

// The windows of the pipeline tests below: tiny.en in f32 and f16, on a session with graphs
// and one without, two rounds over jfk and a dimmer copy of it, every case of
// make_cases(tokenizer) on each encoded window: check(session, tokenizer, case, index, jfk),
// under a trace that names them. Chained graphs are so captured, replayed after other kinds
// of steps, and replayed with other tokens and grammar states.
void for_each_pipeline_window(
    const std::function<std::vector<DecodingOptions>(const WhisperTokenizer&)>& make_cases,
    const std::function<void(WhisperSession&, const WhisperTokenizer&, const DecodingOptions&,
                             size_t, bool)>& check) {
  const Tensor mel = jfk_window(80);
  Tensor mel2 = Tensor::empty(mel.shape(), DType::f32);
  for (int64_t i = 0; i < mel.numel(); ++i)
    mel2.data<float>()[i] = 0.8f * mel.data<float>()[i] - 0.1f;
  for (const DType dt : {DType::f32, DType::f16}) {
    const auto model = WhisperModel::load(kModelDir, {Device::cuda, dt});
    const WhisperTokenizer tok = load_tokenizer(*model);
    const std::vector<DecodingOptions> cases = make_cases(tok);
    const std::unique_ptr<WhisperSession> eager_session = session_without_graphs(model);
    WhisperSession& eager = *eager_session;
    WhisperSession graphed(model);
    for (WhisperSession* session : {&graphed, &eager}) {
      for (int round = 0; round < 2; ++round) {
        for (const Tensor* window : {&mel, static_cast<const Tensor*>(&mel2)}) {
          session->encode(*window);
          for (size_t i = 0; i < cases.size(); ++i) {
            SCOPED_TRACE(std::string(dtype_name(dt)) + (session == &eager ? " eager" : " graphs") +
                         " round " + std::to_string(round) + " case " + std::to_string(i));
            check(*session, tok, cases[i], i, window == &mel);
          }
        }
      }
    }
  }
}

// A session's source with the greedy chain forced on or off (the device choice stays on).
class ChainSwitch : public SessionLogitsSource {
 public:
  ChainSwitch(WhisperSession& s, bool chain) : SessionLogitsSource(s), chain_(chain) {}
  bool chains_greedy() const override { return chain_; }

 private:
  bool chain_;
};

// Greedy windows chained on the GPU (decode_encoded with chains_greedy: step t + 1 queued
// before step t's id is read) against one step at a time (decode_choose): the same tokens,
// scores and streamed tokens, bit for bit, with timestamps on and off at the same offsets.
TEST(WhisperCuda, GreedyPipelineMatchesStepByStep) {
  REQUIRE_CUDA();
  REQUIRE_TINY_EN();
  auto cases = [](const WhisperTokenizer& tok) {
    std::vector<DecodingOptions> c(4);
    c[1].without_timestamps = true;
    c[2].prompt = tok.encode(" And so my fellow Americans.");
    c[3].sample_len = 5;
    return c;
  };
  for_each_pipeline_window(cases, [](WhisperSession& session, const WhisperTokenizer& tok,
                                     const DecodingOptions& options, size_t i, bool jfk) {
    DecodingResult results[2];
    std::vector<int32_t> streamed[2];
    for (int chain : {1, 0}) {
      ChainSwitch source(session, chain == 1);
      DecodingOptions o = options;
      o.on_token = [&](int32_t t) { streamed[chain].push_back(t); };
      results[chain] = decode_encoded(source, tok, o);
    }
    EXPECT_EQ(results[1].tokens, results[0].tokens);
    EXPECT_EQ(results[1].avg_logprob, results[0].avg_logprob);
    EXPECT_EQ(results[1].no_speech_prob, results[0].no_speech_prob);
    EXPECT_EQ(streamed[1], streamed[0]);
    if (i == 3) {
      EXPECT_EQ(results[0].tokens.size(), 5u);
    } else if (jfk) {
      EXPECT_GT(results[0].tokens.size(), 10u);
    }
  });
}

// A session's source with the beam chain forced on or off (the device choice stays on).
class BeamSwitch : public SessionLogitsSource {
 public:
  BeamSwitch(WhisperSession& s, bool chain) : SessionLogitsSource(s), chain_(chain) {}
  bool chains_beam() const override { return chain_; }

 private:
  bool chain_;
};

// Beam search chained on the GPU (decode_encoded with chains_beam: beam_step on the device,
// step t + 1 queued before step t's record is read) against one step at a time
// (decode_choose, BeamSearch::update on the host): the same tokens and scores, bit for bit,
// with beam sizes 5 and 3, patience, timestamps on and off, a prompt and the length limit.
TEST(WhisperCuda, BeamPipelineMatchesStepByStep) {
  REQUIRE_CUDA();
  REQUIRE_TINY_EN();
  auto cases = [](const WhisperTokenizer& tok) {
    std::vector<DecodingOptions> c(5);
    for (auto& o : c) o.beam_size = 5;
    c[1].without_timestamps = true;
    c[2].prompt = tok.encode(" And so my fellow Americans.");
    c[3].beam_size = 3;
    c[3].patience = 2.0f;
    c[4].sample_len = 6;
    return c;
  };
  for_each_pipeline_window(cases, [](WhisperSession& session, const WhisperTokenizer& tok,
                                     const DecodingOptions& options, size_t i, bool jfk) {
    DecodingResult results[2];
    for (int chain : {1, 0}) {
      BeamSwitch source(session, chain == 1);
      results[chain] = decode_encoded(source, tok, options);
    }
    EXPECT_EQ(results[1].tokens, results[0].tokens);
    EXPECT_EQ(results[1].avg_logprob, results[0].avg_logprob);
    EXPECT_EQ(results[1].no_speech_prob, results[0].no_speech_prob);
    if (i == 4) {
      EXPECT_LE(results[0].tokens.size(), 6u);
    } else if (jfk) {
      EXPECT_GT(results[0].tokens.size(), 10u);
    }
  });
}

}  // namespace
}  // namespace parley

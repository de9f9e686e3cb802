// Batched transcription: WhisperBatchSession against WhisperSession (logits of rows at
// different positions and with different audio), its argument checks, and transcribe_batch
// of several different files against transcribe() of each file alone on the CPU f32 parity
// path (real tiny.en when installed).
#include "whisper/transcribe_batch.h"

#include <gtest/gtest.h>

#include <unistd.h>
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <filesystem>
#include <memory>
#include <thread>

#include "audio/decode.h"
#include "audio/mel.h"
#include "engine/alloc_stats.h"
#include "engine/error.h"
#include "whisper/batch_session.h"
#include "whisper/model.h"
#include "whisper/synth.h"
#include "whisper/tokenizer.h"
#include "whisper/transcribe.h"
#include "whisper/whisper_test_util.h"

namespace parley {
namespace {

using whisper_test::english;
using whisper_test::kNeedsFfmpeg;
using whisper_test::model_dir;
namespace fs = std::filesystem;

bool have_model() { return std::filesystem::exists(model_dir() + "/model.bin"); }

std::shared_ptr<const WhisperModel> tiny_en() {
  static const std::shared_ptr<const WhisperModel> model = WhisperModel::load(model_dir());
  return model;
}

std::vector<float> audio(const std::string& name) {
  return load_audio(std::string(PARLEY_TEST_DATA) + "/audio/" + name);
}

// The first 30 s window of `samples`, f32 [n_mels, 3000].
Tensor first_window(const std::vector<float>& samples, int n_mels) {
  return pad_or_trim_frames(log_mel_spectrogram(samples, n_mels));
}

// Windows f32 [n_mels, 3000] stacked as encode()'s [n, n_mels, 3000].
Tensor stack_windows(const std::vector<Tensor>& windows) {
  const int64_t n_mels = windows.at(0).dim(0);
  Tensor mels = Tensor::empty({int64_t(windows.size()), n_mels, kChunkFrames}, DType::f32);
  for (size_t i = 0; i < windows.size(); ++i)
    mels.slice0(int64_t(i), int64_t(i) + 1).reshape({n_mels, kChunkFrames}).copy_from(windows[i]);
  return mels;
}

// Deterministic noise (a 32-bit LCG), amplitude `amp`.
std::vector<float> noise(size_t n, float amp) {
  std::vector<float> out(n);
  uint32_t x = 12345;
  for (float& v : out) {
    x = x * 1664525u + 1013904223u;
    v = amp * (float(x >> 8) / float(1u << 24) * 2.0f - 1.0f);
  }
  return out;
}

float max_abs_diff(const float* a, const float* b, int64_t n) {
  float m = 0;
  for (int64_t i = 0; i < n; ++i) m = std::max(m, std::abs(a[i] - b[i]));
  return m;
}

// ---------------------------------------------------------------- WhisperBatchSession

TEST(WhisperBatchSession, StepLogitsOfRowsAtDifferentPositionsEqualSeparateSessions) {
  if (!has_ffmpeg()) GTEST_SKIP() << kNeedsFfmpeg;
  if (!have_model()) GTEST_SKIP() << "no tiny.en model at " << model_dir();
  const auto model = tiny_en();
  const int n_mels = model->config().n_mels;
  const auto& tok = english();
  // Three windows of different audio; slot 2 is left out of the batch (slots 0, 1, 3 decode).
  const std::vector<Tensor> windows = {first_window(audio("jfk.wav"), n_mels),
                                       first_window(audio("english.wav"), n_mels),
                                       first_window(audio("hotwords.mp3"), n_mels)};
  const std::vector<int32_t> slots = {0, 1, 3};
  const std::vector<std::vector<int32_t>> initial = {
      tok.sot_sequence("en", "transcribe"),
      {tok.sot_prev(), 400, 401, 402, 403, 404, tok.sot(), tok.no_timestamps()},
      {tok.sot(), tok.timestamp_begin(), 843}};
  const Tensor mels = stack_windows(windows);

  WhisperBatchSession batch(model, 4);
  batch.encode(slots, mels);
  std::vector<std::unique_ptr<WhisperSession>> singles;
  for (int i = 0; i < 3; ++i) {
    singles.push_back(std::make_unique<WhisperSession>(model));
    singles.back()->encode(windows[size_t(i)]);
  }
  const int64_t n_vocab = model->config().n_vocab;
  float worst = 0;
  for (int i = 0; i < 3; ++i) {
    const Tensor a = batch.prefill(slots[size_t(i)], initial[size_t(i)]);
    const Tensor b = singles[size_t(i)]->decode(initial[size_t(i)]);
    ASSERT_EQ(a.shape(), b.shape());
    worst = std::max(worst, max_abs_diff(a.data<float>(), b.data<float>(), a.numel()));
    EXPECT_EQ(batch.n_cached(slots[size_t(i)]), int(initial[size_t(i)].size()));
  }
  // Five steps; at step 2 slot 1 sits out (the rows then read slots that are not consecutive).
  for (int k = 0; k < 5; ++k) {
    std::vector<int32_t> step_slots, step_tokens;
    for (int i = 0; i < 3; ++i) {
      if (k == 2 && i == 1) continue;
      step_slots.push_back(slots[size_t(i)]);
      step_tokens.push_back(int32_t(1000 + 37 * k + 11 * i));
    }
    const Tensor logits = batch.step(step_slots, step_tokens);
    ASSERT_EQ(logits.dim(0), int64_t(step_slots.size()));
    ASSERT_EQ(logits.dim(1), n_vocab);
    for (size_t r = 0; r < step_slots.size(); ++r) {
      const size_t i = size_t(std::find(slots.begin(), slots.end(), step_slots[r]) - slots.begin());
      const Tensor ref = singles[i]->decode(std::span<const int32_t>(&step_tokens[r], 1));
      const float diff =
          max_abs_diff(logits.data<float>() + int64_t(r) * n_vocab, ref.data<float>(), n_vocab);
      worst = std::max(worst, diff);
      EXPECT_LT(diff, 2e-3f) << "step " << k << " slot " << step_slots[r];
    }
  }
  for (int i = 0; i < 3; ++i)
    EXPECT_EQ(batch.n_cached(slots[size_t(i)]), singles[size_t(i)]->n_cached());
  std::printf("batch vs single logits: max |diff| %.3g\n", worst);
}

TEST(WhisperBatchSession, BatchedPrefillEqualsSeparateSessions) {
  if (!has_ffmpeg()) GTEST_SKIP() << kNeedsFfmpeg;
  if (!have_model()) GTEST_SKIP() << "no tiny.en model at " << model_dir();
  const auto model = tiny_en();
  const int n_mels = model->config().n_mels;
  const int64_t n_vocab = model->config().n_vocab;
  const auto& tok = english();
  const std::vector<Tensor> windows = {first_window(audio("jfk.wav"), n_mels),
                                       first_window(audio("english.wav"), n_mels)};
  const std::vector<int32_t> slots = {2, 0};  // not in order: two runs
  // Two sequences of the same length (5), different tokens.
  const std::vector<std::vector<int32_t>> initial = {
      {tok.sot_prev(), 400, 401, tok.sot(), tok.timestamp_begin()},
      {tok.sot_prev(), 900, 902, tok.sot(), tok.no_timestamps()}};
  const Tensor mels = stack_windows(windows);
  WhisperBatchSession batch(model, 3);
  batch.encode(slots, mels);
  std::vector<int32_t> all = initial[0];
  all.insert(all.end(), initial[1].begin(), initial[1].end());
  const Tensor logits = batch.prefill_batch(slots, all);
  ASSERT_EQ(logits.dim(0), 10);
  float worst = 0;
  for (int i = 0; i < 2; ++i) {
    WhisperSession single(model);
    single.encode(windows[size_t(i)]);
    const Tensor ref = single.decode(initial[size_t(i)]);
    worst = std::max(worst, max_abs_diff(logits.data<float>() + i * 5 * n_vocab, ref.data<float>(),
                                         ref.numel()));
    EXPECT_EQ(batch.n_cached(slots[size_t(i)]), 5);
    // A step after the batched prefill reads the K/V it wrote.
    const int32_t next = 1234;
    const Tensor a = batch.step(std::vector<int32_t>{slots[size_t(i)]}, std::vector<int32_t>{next});
    const Tensor b = single.decode(std::span<const int32_t>(&next, 1));
    worst = std::max(worst, max_abs_diff(a.data<float>(), b.data<float>(), n_vocab));
  }
  EXPECT_LT(worst, 2e-3f);
  std::printf("batched prefill vs single: max |diff| %.3g\n", worst);
  // Only fresh slots, and the same count per slot.
  EXPECT_THROW(batch.prefill_batch(slots, all), Error);
  batch.reset(0);
  batch.reset(2);
  EXPECT_THROW(batch.prefill_batch(slots, std::vector<int32_t>{tok.sot(), tok.sot(), tok.sot()}),
               Error);
}

// Sequences of different lengths in one pass (prefill_ragged): each slot's wanted rows
// equal a separate session's, and the steps after it (one per slot, two rounds) read only
// the slot's own cached positions, never the pads written past its length.
TEST(WhisperBatchSession, RaggedPrefillEqualsSeparateSessions) {
  if (!has_ffmpeg()) GTEST_SKIP() << kNeedsFfmpeg;
  if (!have_model()) GTEST_SKIP() << "no tiny.en model at " << model_dir();
  const auto model = tiny_en();
  const int n_mels = model->config().n_mels;
  const int64_t n_vocab = model->config().n_vocab;
  const auto& tok = english();
  const std::vector<Tensor> windows = {first_window(audio("jfk.wav"), n_mels),
                                       first_window(audio("english.wav"), n_mels),
                                       first_window(audio("jfk.wav"), n_mels)};
  const std::vector<int32_t> slots = {1, 3, 0};
  const std::vector<std::vector<int32_t>> initial = {
      {tok.sot(), tok.timestamp_begin()},
      {tok.sot_prev(), 900, 902, 903, 904, 905, 906, tok.sot(), tok.no_timestamps()},
      {tok.sot_prev(), 400, 401, tok.sot()}};
  const Tensor mels = stack_windows(windows);
  WhisperBatchSession batch(model, 4);
  batch.encode(slots, mels);
  std::vector<int32_t> all, lengths;
  std::vector<int64_t> rows;
  for (const auto& seq : initial) {
    all.insert(all.end(), seq.begin(), seq.end());
    lengths.push_back(int32_t(seq.size()));
    rows.push_back(0);                        // the first position
    rows.push_back(int64_t(seq.size()) - 1);  // and the last
  }
  const Tensor logits = batch.prefill_ragged(slots, all, lengths, rows);
  ASSERT_EQ(logits.dim(0), 6);
  float worst = 0;
  std::vector<std::unique_ptr<WhisperSession>> singles;
  for (int i = 0; i < 3; ++i) {
    singles.push_back(std::make_unique<WhisperSession>(model));
    singles.back()->encode(windows[size_t(i)]);
    const Tensor ref = singles.back()->decode(initial[size_t(i)]);
    const int64_t last = ref.dim(0) - 1;
    worst = std::max(
        worst, max_abs_diff(logits.data<float>() + (2 * i) * n_vocab, ref.data<float>(), n_vocab));
    worst = std::max(worst, max_abs_diff(logits.data<float>() + (2 * i + 1) * n_vocab,
                                         ref.data<float>() + last * n_vocab, n_vocab));
    EXPECT_EQ(batch.n_cached(slots[size_t(i)]), int(initial[size_t(i)].size()));
  }
  for (int round = 0; round < 2; ++round) {
    const std::vector<int32_t> next = {1234, 2345, 3456};
    const Tensor a = batch.step(slots, next);
    for (int i = 0; i < 3; ++i) {
      const Tensor b = singles[size_t(i)]->decode(std::span<const int32_t>(&next[size_t(i)], 1));
      worst =
          std::max(worst, max_abs_diff(a.data<float>() + i * n_vocab, b.data<float>(), n_vocab));
    }
  }
  EXPECT_LT(worst, 2e-3f);
  std::printf("ragged prefill vs single: max |diff| %.3g\n", worst);
  // Lengths must add up to the tokens; rows must lie inside each sequence.
  batch.reset(0);
  batch.reset(1);
  batch.reset(3);
  EXPECT_THROW(batch.prefill_ragged(slots, all, std::vector<int32_t>{2, 9, 3}, rows), Error);
  std::vector<int64_t> bad = rows;
  bad[0] = 2;  // past the first sequence's 2 tokens
  EXPECT_THROW(batch.prefill_ragged(slots, all, lengths, bad), Error);
}

// prefill / prefill_batch with `rows` return those rows of the full logits; a bad row
// is refused before the pass (nothing cached).
TEST(WhisperBatchSession, PrefillRowsAreThoseRowsOfTheFullLogits) {
  if (!have_model()) GTEST_SKIP() << "no tiny.en model at " << model_dir();
  const auto model = tiny_en();
  const int n_mels = model->config().n_mels;
  const int64_t v = model->config().n_vocab;
  const auto& tok = english();
  const Tensor window = first_window(audio("jfk.wav"), n_mels);
  const Tensor mels = stack_windows({window, window});
  const std::vector<int32_t> slots = {0, 1};
  const std::vector<int32_t> one = {tok.sot_prev(), 400, 401, tok.sot(), tok.timestamp_begin()};
  const std::vector<int32_t> other = {tok.sot_prev(), 900, 902, tok.sot(), tok.no_timestamps()};
  std::vector<int32_t> both = one;
  both.insert(both.end(), other.begin(), other.end());
  const std::vector<int64_t> rows = {3, 4};
  WhisperBatchSession full(model, 2), picked(model, 2);
  full.encode(slots, mels);
  picked.encode(slots, mels);
  EXPECT_THROW(picked.prefill_batch(slots, both, std::vector<int64_t>{5}), Error);
  EXPECT_THROW(picked.prefill(0, one, std::vector<int64_t>{-1}), Error);
  EXPECT_EQ(picked.n_cached(0), 0);
  const Tensor all = full.prefill_batch(slots, both);
  const Tensor two = picked.prefill_batch(slots, both, rows);
  ASSERT_EQ(two.dim(0), 4);
  for (int64_t k = 0; k < 4; ++k) {
    const int64_t src = (k / 2) * 5 + rows[size_t(k % 2)];
    // The same rows, up to the GEMM's rounding for fewer rows (another kernel).
    EXPECT_LE(max_abs_diff(two.data<float>() + k * v, all.data<float>() + src * v, v), 1e-4f) << k;
  }
  full.reset(0);
  picked.reset(0);
  const Tensor a = full.prefill(0, other);
  const Tensor b = picked.prefill(0, other, std::vector<int64_t>{4});
  ASSERT_EQ(b.dim(0), 1);
  EXPECT_LE(max_abs_diff(b.data<float>(), a.data<float>() + 4 * v, v), 1e-4f);
}

// step_argmax (the argmax of each row on the model's device) picks what the argmax of
// step()'s host logits picks, and both advance the slots alike.
TEST(WhisperBatchSession, StepArgmaxEqualsArgmaxOfStepLogits) {
  if (!has_ffmpeg()) GTEST_SKIP() << kNeedsFfmpeg;
  if (!have_model()) GTEST_SKIP() << "no tiny.en model at " << model_dir();
  const auto model = tiny_en();
  const int n_mels = model->config().n_mels;
  const auto& tok = english();
  const std::vector<Tensor> windows = {first_window(audio("jfk.wav"), n_mels),
                                       first_window(audio("english.wav"), n_mels)};
  const Tensor mels = stack_windows(windows);
  const std::vector<int32_t> slots = {0, 1};
  WhisperBatchSession by_logits(model, 2), by_argmax(model, 2);
  const std::vector<int32_t> initial = {tok.sot(), tok.no_timestamps()};
  std::vector<int32_t> all = initial;
  all.insert(all.end(), initial.begin(), initial.end());
  std::vector<int32_t> a, b;
  for (WhisperBatchSession* s : {&by_logits, &by_argmax}) {
    s->encode(slots, mels);
    const Tensor first = s->prefill_batch(slots, all);
    const int64_t v = first.dim(1);
    auto& next = s == &by_logits ? a : b;
    for (int i = 0; i < 2; ++i) {
      const float* row = first.data<float>() + (2 * i + 1) * v;
      next.push_back(int32_t(std::max_element(row, row + v) - row));
    }
  }
  std::vector<int32_t> picked;
  for (int k = 0; k < 12; ++k) {
    const Tensor logits = by_logits.step(slots, a);
    const int64_t v = logits.dim(1);
    for (int r = 0; r < 2; ++r) {
      const float* row = logits.data<float>() + r * v;
      a[size_t(r)] = int32_t(std::max_element(row, row + v) - row);
    }
    b = by_argmax.step_argmax(slots, b);
    ASSERT_EQ(a, b) << "step " << k;
    picked.insert(picked.end(), a.begin(), a.end());
  }
  EXPECT_EQ(by_argmax.n_cached(0), 14);
  // The two windows say different things: the rows are not one row repeated.
  EXPECT_NE(picked[0], picked[1]);
}

TEST(WhisperBatchSession, BadArgumentsAreClearErrors) {
  if (!have_model()) GTEST_SKIP() << "no tiny.en model at " << model_dir();
  const auto model = tiny_en();
  const WhisperConfig& c = model->config();
  EXPECT_THROW(WhisperBatchSession(model, 0), Error);
  WhisperBatchSession batch(model, 2);
  const int32_t sot = english().sot();
  // Not encoded yet.
  EXPECT_THROW(batch.prefill(0, std::vector<int32_t>{sot}), Error);
  const Tensor one = Tensor::zeros({1, c.n_mels, kChunkFrames}, DType::f32);
  const std::vector<int32_t> slot0 = {0}, slot5 = {5}, twice = {0, 0};
  EXPECT_THROW(batch.encode(slot5, one), Error);  // unknown slot
  const Tensor two = Tensor::zeros({2, c.n_mels, kChunkFrames}, DType::f32);
  EXPECT_THROW(batch.encode(twice, two), Error);  // listed twice
  EXPECT_THROW(batch.encode(slot0, two), Error);  // one slot, two windows
  batch.encode(slot0, one);
  try {
    batch.prefill(0, std::vector<int32_t>{sot, c.n_vocab});
    ADD_FAILURE() << "token id out of range accepted";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("token id"), std::string::npos) << e.what();
  }
  EXPECT_EQ(batch.n_cached(0), 0);
  const std::vector<int32_t> tok0 = {sot}, bad_tok = {-1};
  EXPECT_THROW(batch.step(slot0, bad_tok), Error);
  EXPECT_THROW(batch.step(std::vector<int32_t>{1}, tok0), Error);          // slot 1 has no audio
  EXPECT_THROW(batch.step(std::vector<int32_t>{2}, tok0), Error);          // unknown slot
  EXPECT_THROW(batch.step(slot0, std::vector<int32_t>{sot, sot}), Error);  // count mismatch
  // Fill the context, then one more token is refused.
  batch.prefill(0, std::vector<int32_t>(size_t(c.n_text_ctx - 1), sot));
  batch.step(slot0, tok0);
  EXPECT_EQ(batch.n_cached(0), c.n_text_ctx);
  try {
    batch.step(slot0, tok0);
    ADD_FAILURE() << "step past the context accepted";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("full"), std::string::npos) << e.what();
  }
  EXPECT_THROW(batch.prefill(0, tok0), Error);
  batch.reset(0);
  EXPECT_EQ(batch.n_cached(0), 0);
  EXPECT_EQ(batch.prefill(0, tok0).dim(0), 1);
}

// encode()'s n_ctx: a slot encoded over the first 500 positions decodes as a model loaded
// with audio_ctx 500 does (its cross-attention sees 500 keys), beside a full-context slot in
// the same steps, and a full window encoded later into the same slot is whole again.
TEST(WhisperBatchSession, ShortWindowDecodesAsAModelTruncatedToIt) {
  if (!have_model()) GTEST_SKIP() << "no tiny.en model at " << model_dir();
  const auto model = tiny_en();
  LoadOptions lo;
  lo.audio_ctx = 500;
  const auto truncated = WhisperModel::load(model_dir(), lo);
  const int n_mels = model->config().n_mels;
  const auto& tok = english();
  const Tensor speech = first_window(audio("english.wav"), n_mels);  // 2.7 s
  const Tensor jfk = first_window(audio("jfk.wav"), n_mels);

  WhisperBatchSession batch(model, 3);
  EXPECT_EQ(batch.audio_ctx(1), 0);
  batch.encode(std::vector<int32_t>{0}, stack_windows({jfk}));
  batch.encode(std::vector<int32_t>{1}, stack_windows({speech}), 500);
  EXPECT_EQ(batch.audio_ctx(0), 1500);
  EXPECT_EQ(batch.audio_ctx(1), 500);
  WhisperSession full(model), short_ref(truncated);
  full.encode(jfk);
  short_ref.encode(speech);
  WhisperSession* refs[2] = {&full, &short_ref};

  const std::vector<int32_t> sot = tok.sot_sequence("en", "transcribe");
  const int64_t n_vocab = model->config().n_vocab;
  float worst = 0;
  const auto compare = [&](const Tensor& got, const Tensor& want, const std::string& what) {
    ASSERT_EQ(got.numel(), want.numel()) << what;
    const float diff = max_abs_diff(got.data<float>(), want.data<float>(), want.numel());
    worst = std::max(worst, diff);
    EXPECT_LT(diff, 2e-3f) << what;
  };
  // Slot 1 alone (prefill), then both slots in one run of steps.
  compare(batch.prefill(1, sot), short_ref.decode(sot), "short prefill");
  compare(batch.prefill(0, sot), full.decode(sot), "full prefill");
  for (int k = 0; k < 4; ++k) {
    const std::vector<int32_t> slots = {0, 1}, tokens = {int32_t(1000 + k), int32_t(2000 + k)};
    const Tensor logits = batch.step(slots, tokens);
    for (int r = 0; r < 2; ++r) {
      const Tensor want = refs[r]->decode(std::span<const int32_t>(&tokens[size_t(r)], 1));
      ASSERT_EQ(want.numel(), n_vocab);
      const Tensor row = logits.slice0(r, r + 1);
      compare(row, want, "step " + std::to_string(k) + " slot " + std::to_string(r));
    }
  }
  // The audio past 500 positions is not heard: another window that differs only there
  // gives slot 1 the same logits.
  Tensor later = pad_or_trim_frames(speech, kChunkFrames);
  std::fill_n(later.data<float>() + 2 * 500 + 10, 200, 0.7f);  // mel row 0, frames 1010..
  WhisperBatchSession other(model, 2);
  other.encode(std::vector<int32_t>{1}, stack_windows({later}), 500);
  const Tensor a = other.prefill(1, sot);
  WhisperBatchSession again(model, 2);
  again.encode(std::vector<int32_t>{1}, stack_windows({speech}), 500);
  const Tensor b = again.prefill(1, sot);
  EXPECT_EQ(max_abs_diff(a.data<float>(), b.data<float>(), a.numel()), 0.0f);
  // A full window into the short slot: whole again (the full session's logits).
  batch.encode(std::vector<int32_t>{1}, stack_windows({jfk}));
  EXPECT_EQ(batch.audio_ctx(1), 1500);
  WhisperSession full2(model);
  full2.encode(jfk);
  compare(batch.prefill(1, sot), full2.decode(sot), "full window after a short one");
  // Out of range: a clear error.
  for (int64_t bad : {int64_t(-1), int64_t(1501)})
    EXPECT_THROW(batch.encode(std::vector<int32_t>{2}, stack_windows({jfk}), bad), Error);
  std::printf("short window vs truncated model: max |diff| %.3g\n", worst);
}

TEST(WhisperBatchSession, WarmStepsMakeNoSystemAllocations) {
  if (!have_model()) GTEST_SKIP() << "no tiny.en model at " << model_dir();
  const auto model = tiny_en();
  const WhisperConfig& c = model->config();
  const auto& tok = english();
  WhisperBatchSession batch(model, 2);
  const std::vector<int32_t> slots = {0, 1};
  batch.encode(slots, Tensor::zeros({2, c.n_mels, kChunkFrames}, DType::f32));
  const std::vector<int32_t> sot = tok.sot_sequence("en", "transcribe");
  batch.prefill(0, sot);
  batch.prefill(1, std::vector<int32_t>{tok.sot_prev(), 400, 401, tok.sot()});
  std::vector<int32_t> tokens = {500, 600};
  for (int i = 0; i < 3; ++i) batch.step(slots, tokens);  // warms the pools
  const AllocStats before = alloc_stats();
  for (int i = 0; i < 10; ++i) {
    tokens = {int32_t(700 + i), int32_t(800 + i)};
    batch.step(slots, tokens);
  }
  EXPECT_EQ(alloc_stats().host_allocs, before.host_allocs);
  EXPECT_EQ(batch.n_cached(0), int(sot.size()) + 13);
  EXPECT_EQ(batch.n_cached(1), 4 + 13);
}

// ---------------------------------------------------------------- transcribe_batch

void expect_same(const TranscribeResult& batched, const TranscribeResult& alone,
                 const std::string& name) {
  EXPECT_EQ(batched.text, alone.text) << name;
  EXPECT_EQ(batched.language, alone.language) << name;
  ASSERT_EQ(batched.segments.size(), alone.segments.size()) << name;
  for (size_t i = 0; i < alone.segments.size(); ++i) {
    const Segment& a = batched.segments[i];
    const Segment& b = alone.segments[i];
    EXPECT_EQ(a.id, b.id) << name << " segment " << i;
    EXPECT_EQ(a.seek, b.seek) << name << " segment " << i;
    EXPECT_EQ(a.start, b.start) << name << " segment " << i;
    EXPECT_EQ(a.end, b.end) << name << " segment " << i;
    EXPECT_EQ(a.tokens, b.tokens) << name << " segment " << i;
    EXPECT_EQ(a.text, b.text) << name << " segment " << i;
    EXPECT_EQ(a.temperature, b.temperature) << name << " segment " << i;
    EXPECT_NEAR(a.avg_logprob, b.avg_logprob, 1e-4) << name << " segment " << i;
    EXPECT_NEAR(a.no_speech_prob, b.no_speech_prob, 1e-4) << name << " segment " << i;
    EXPECT_NEAR(a.compression_ratio, b.compression_ratio, 1e-6) << name << " segment " << i;
  }
}

TEST(TranscribeBatch, EveryFileGetsWhatTranscribeGivesItAlone) {
  if (!has_ffmpeg()) GTEST_SKIP() << kNeedsFfmpeg;
  if (!have_model()) GTEST_SKIP() << "no tiny.en model at " << model_dir();
  const auto model = tiny_en();
  const auto& tok = english();
  // Different lengths and kinds: 60 s of speech (windows with previous-text prompts, English
  // then German: fallbacks), short clips, and 20 s of faint noise (the silence skip).
  const std::vector<std::string> names = {"multilingual.mp3", "jfk.wav", "english.wav",
                                          "hotwords.mp3", "noise"};
  std::vector<std::vector<float>> samples;
  for (const auto& name : names)
    samples.push_back(name == "noise" ? noise(20 * 16000, 0.002f) : audio(name));

  TranscribeOptions o;  // the reference's defaults: the whole temperature ladder
  std::vector<TranscribeResult> alone;
  WhisperSession session(model);
  for (const auto& s : samples) alone.push_back(transcribe(session, tok, s, o));

  // Three slots for five files: rounds mix windows of different files and seeks.
  WhisperBatchSession batch(model, 3);
  BatchTranscribeStats stats;
  std::vector<std::vector<std::string>> seen(names.size());
  const auto batched =
      transcribe_batch(batch, session, tok, samples, o, &stats,
                       [&](size_t f, const Segment& s) { seen[f].push_back(s.text); });
  ASSERT_EQ(batched.size(), names.size());
  for (size_t f = 0; f < names.size(); ++f) {
    expect_same(batched[f], alone[f], names[f]);
    ASSERT_EQ(seen[f].size(), alone[f].segments.size()) << names[f];
    for (size_t i = 0; i < seen[f].size(); ++i) {
      // on_file_segment is called where on_segment is: after the empty-segment clean-up.
      EXPECT_EQ(seen[f][i], alone[f].segments[i].text) << names[f];
    }
  }
  // The cases the test is meant to cover did happen.
  EXPECT_GE(alone[0].segments.size(), 4u);
  EXPECT_GT(alone[0].segments.back().seek, 0);              // a later window, with a prompt
  EXPECT_TRUE(alone[4].segments.empty()) << alone[4].text;  // skipped as silence
  EXPECT_NE(alone[1].text.find("ask not what your country"), std::string::npos);
  EXPECT_GT(stats.windows, int64_t(names.size()));
  EXPECT_GT(stats.steps, 0);
  std::printf(
      "batched: %lld windows in %lld batches, %lld tokens, %lld steps, %lld fallbacks; "
      "encode %.0f ms, decode %.0f ms, fallback %.0f ms\n",
      (long long)stats.windows, (long long)stats.batches, (long long)stats.tokens,
      (long long)stats.steps, (long long)stats.fallbacks, stats.encode_ms, stats.decode_ms,
      stats.fallback_ms);
}

// A synthetic multilingual tiny (random weights, real vocabulary): language detection per
// file, then batched windows with the per-file result; greedy only and short windows (its
// random text fails every fallback threshold).
TEST(TranscribeBatch, SyntheticMultilingualDetectsPerFileAsTranscribeDoes) {
  if (!has_ffmpeg()) GTEST_SKIP() << kNeedsFfmpeg;
  const fs::path dir =
      fs::temp_directory_path() / ("parley_batch_test_synth_" + std::to_string(::getpid()));
  fs::remove_all(dir);
  SynthOptions so;
  so.shape = "tiny";
  so.seed = 3;
  so.vocab_path = std::string(PARLEY_TEST_DATA) + "/whisper/multilingual.tiktoken";
  write_synth_whisper(so, dir.string());
  const auto model = WhisperModel::load(dir.string());
  const WhisperTokenizer tok = load_tokenizer(*model);
  ASSERT_TRUE(tok.multilingual());
  std::vector<std::vector<float>> samples = {audio("french.aiff"), audio("jfk.wav"),
                                             audio("english.wav")};
  TranscribeOptions o;
  o.temperatures = {0.0f};
  o.sample_len = 24;
  WhisperSession session(model);
  std::vector<TranscribeResult> alone;
  for (const auto& s : samples) alone.push_back(transcribe(session, tok, s, o));
  WhisperBatchSession batch(model, 2);
  const auto batched = transcribe_batch(batch, session, tok, samples, o);
  ASSERT_EQ(batched.size(), samples.size());
  for (size_t f = 0; f < samples.size(); ++f) {
    EXPECT_FALSE(alone[f].language.empty());
    expect_same(batched[f], alone[f], "synthetic file " + std::to_string(f));
  }
  // With a no-speech callback the windows' first rows are read on the calling thread (else
  // on the CPU threads); the results are the same.
  const auto caller = std::this_thread::get_id();
  int calls = 0, elsewhere = 0;
  TranscribeOptions with_callback = o;
  with_callback.on_no_speech_prob = [&](float p) {
    ++calls;
    elsewhere += std::this_thread::get_id() != caller;
    EXPECT_TRUE(p >= 0.0f && p <= 1.0f) << p;
  };
  const auto called = transcribe_batch(batch, session, tok, samples, with_callback);
  EXPECT_GE(calls, int(samples.size()));
  EXPECT_EQ(elsewhere, 0);
  for (size_t f = 0; f < samples.size(); ++f)
    expect_same(called[f], batched[f], "with a callback, file " + std::to_string(f));
  size_t tokens = 0;
  for (const auto& r : alone)
    for (const auto& s : r.segments) tokens += s.tokens.size();
  EXPECT_GT(tokens, 0u);  // something was decoded and compared
  std::printf("synthetic: languages %s %s %s, %zu tokens\n", alone[0].language.c_str(),
              alone[1].language.c_str(), alone[2].language.c_str(), tokens);
  fs::remove_all(dir);
}

TEST(TranscribeBatch, UnsupportedOptionsAreNamed) {
  const auto& tok = english();
  TranscribeOptions o;
  EXPECT_FALSE(batch_unsupported(o, tok).has_value());
  o.beam_size = 5;
  EXPECT_EQ(batch_unsupported(o, tok).value_or(""), "beam search");
  o = {};
  o.word_timestamps = true;
  EXPECT_EQ(batch_unsupported(o, tok).value_or(""), "word timestamps");
  o = {};
  o.temperatures = {0.5f};
  o.best_of = 3;
  EXPECT_TRUE(batch_unsupported(o, tok).has_value());
  o.best_of = 0;
  EXPECT_FALSE(batch_unsupported(o, tok).has_value());  // sampling at the first temperature
  o = {};
  EXPECT_FALSE(batch_unsupported(o, whisper_test::multilingual()).has_value());  // detects
  o.token_logprobs = true;
  EXPECT_EQ(batch_unsupported(o, tok).value_or(""), "token logprobs");
}

}  // namespace
}  // namespace parley

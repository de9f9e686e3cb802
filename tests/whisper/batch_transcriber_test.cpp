// BatchTranscriber, the continuous batch of transcriptions: files that join while others
// are mid-file, with different lengths and options, each get what transcribe() gives them
// alone; windows of different files share encoder calls; a cancelled file frees its slot at
// the next step (real tiny.en, CPU f32).
#include "whisper/batch_transcriber.h"

#include <gtest/gtest.h>

#include <map>
#include <memory>
#include <string>
#include <vector>

#include "audio/decode.h"
#include "audio/mel.h"
#include "engine/error.h"
#include "whisper/batch_session.h"
#include "whisper/model.h"
#include "whisper/tokenizer.h"
#include "whisper/transcribe.h"
#include "whisper/whisper_test_util.h"

namespace parley {
namespace {

using whisper_test::english;
using whisper_test::have_tiny_en;
using whisper_test::model_dir;

std::shared_ptr<const WhisperModel> tiny_en() {
  static const std::shared_ptr<const WhisperModel> model = WhisperModel::load(model_dir());
  return model;
}

std::vector<float> clip(const std::string& name) {
  return load_audio(std::string(PARLEY_TEST_DATA) + "/audio/" + name);
}

Tensor mel_of(const std::vector<float>& samples) {
  return log_mel_spectrogram(samples, 80, kChunkSamples);
}

void expect_same(const TranscribeResult& got, const TranscribeResult& alone,
                 const std::string& name) {
  EXPECT_EQ(got.text, alone.text) << name;
  ASSERT_EQ(got.segments.size(), alone.segments.size()) << name;
  for (size_t i = 0; i < alone.segments.size(); ++i) {
    EXPECT_EQ(got.segments[i].seek, alone.segments[i].seek) << name << " segment " << i;
    EXPECT_EQ(got.segments[i].start, alone.segments[i].start) << name << " segment " << i;
    EXPECT_EQ(got.segments[i].end, alone.segments[i].end) << name << " segment " << i;
    EXPECT_EQ(got.segments[i].tokens, alone.segments[i].tokens) << name << " segment " << i;
  }
}

// Steps until every file has left; returns the results by id.
std::map<uint64_t, BatchTranscriber::Finished> drain(BatchTranscriber& t) {
  std::map<uint64_t, BatchTranscriber::Finished> out;
  while (t.files() > 0) {
    for (auto& f : t.step()) out[f.id] = std::move(f);
  }
  return out;
}

TEST(BatchTranscriber, FilesJoiningMidRunGetWhatTranscribeGivesThemAlone) {
  if (!have_tiny_en()) GTEST_SKIP() << "no tiny.en model at " << model_dir();
  const auto model = tiny_en();
  const auto& tok = english();
  const std::vector<float> jfk = clip("jfk.wav");
  // Two windows: jfk twice and a bit (33 s), so the second window has a previous-text prompt.
  std::vector<float> long_file = jfk;
  long_file.insert(long_file.end(), jfk.begin(), jfk.end());
  long_file.insert(long_file.end(), jfk.begin(), jfk.begin() + 11 * 16000);
  const std::vector<float> head(jfk.begin(), jfk.begin() + 4 * 16000);  // "And so my fellow"
  const std::vector<std::vector<float>> files = {long_file, clip("stereo_diarization.wav"), jfk,
                                                 head};
  const std::vector<std::string> names = {"jfk x3 (33 s)", "stereo_diarization", "jfk",
                                          "jfk's first 4 s"};
  std::vector<TranscribeOptions> options(files.size());
  options[2].initial_prompt = "President Kennedy's inaugural address.";  // a per-file prompt
  options[3].without_timestamps = true;
  options[3].temperatures = {0.0f};  // no fallback ladder

  std::vector<TranscribeResult> alone;
  WhisperSession solo(model);
  for (size_t f = 0; f < files.size(); ++f)
    alone.push_back(transcribe(solo, tok, files[f], options[f]));

  // Three slots for four files: the first two start together, the others join mid-run.
  WhisperBatchSession batch(model, 3);
  BatchTranscriber t(batch, solo, tok);
  std::vector<uint64_t> ids;
  const uint64_t encoder_runs = whisper_run_counters().encoder_runs;
  ids.push_back(t.add(mel_of(files[0]), options[0]));
  ids.push_back(t.add(mel_of(files[1]), options[1]));
  std::map<uint64_t, BatchTranscriber::Finished> results;
  for (int s = 0; s < 5; ++s)
    for (auto& f : t.step()) results[f.id] = std::move(f);
  EXPECT_EQ(t.decoding(), 2);  // both still mid-window
  ids.push_back(t.add(mel_of(files[2]), options[2]));
  ids.push_back(t.add(mel_of(files[3]), options[3]));  // waits for a slot
  for (auto& [id, f] : drain(t)) results[id] = std::move(f);

  for (size_t f = 0; f < files.size(); ++f) {
    ASSERT_TRUE(results.count(ids[f])) << names[f];
    const auto& r = results[ids[f]];
    ASSERT_TRUE(r.result.has_value()) << names[f];
    expect_same(*r.result, alone[f], names[f]);
  }
  EXPECT_GT(alone[0].segments.back().seek, 0);  // a second window, with a prompt
  EXPECT_NE(alone[2].text.find("ask not what your country"), std::string::npos);
  EXPECT_EQ(alone[3].segments.size(), 1u);
  const auto& st = t.stats();
  EXPECT_GE(st.windows, 5);           // >= 2 + 1 + 1 + 1
  EXPECT_LT(st.batches, st.windows);  // windows shared encoder calls
  // The batch's encoder calls and nothing else (no fallback, no language detection).
  EXPECT_EQ(whisper_run_counters().encoder_runs - encoder_runs,
            uint64_t(st.batches + st.fallbacks));
  std::printf("%lld windows in %lld encoder calls, %lld steps, %lld fallbacks\n",
              (long long)st.windows, (long long)st.batches, (long long)st.steps,
              (long long)st.fallbacks);
}

TEST(BatchTranscriber, ACancelledFileLeavesAtTheNextStepAndFreesItsSlot) {
  if (!have_tiny_en()) GTEST_SKIP() << "no tiny.en model at " << model_dir();
  const auto model = tiny_en();
  const auto& tok = english();
  const std::vector<float> jfk = clip("jfk.wav");
  WhisperSession solo(model);
  const TranscribeResult alone = transcribe(solo, tok, jfk, {});

  WhisperBatchSession batch(model, 2);
  BatchTranscriber t(batch, solo, tok);
  bool cancel = false;
  TranscribeOptions cancellable;
  cancellable.cancelled = [&cancel] { return cancel; };
  const uint64_t keep = t.add(mel_of(jfk), {});
  const uint64_t gone = t.add(mel_of(jfk), cancellable);
  const uint64_t waiting = t.add(mel_of(jfk), {});
  for (int s = 0; s < 3; ++s) ASSERT_TRUE(t.step().empty());
  EXPECT_EQ(t.decoding(), 2);
  cancel = true;
  std::vector<BatchTranscriber::Finished> left = t.step();
  ASSERT_EQ(left.size(), 1u);
  EXPECT_EQ(left[0].id, gone);
  ASSERT_TRUE(left[0].error);
  try {
    std::rethrow_exception(left[0].error);
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), ErrorKind::cancelled);
  }
  EXPECT_EQ(t.decoding(), 2);  // the waiting file took the freed slot in the same step
  auto rest = drain(t);
  ASSERT_TRUE(rest[keep].result && rest[waiting].result);
  expect_same(*rest[keep].result, alone, "kept");
  expect_same(*rest[waiting].result, alone, "joined after the cancel");
}

// TranscribeOptions::fit_audio_ctx: a 2.7 s file is encoded over 750 positions (15 s), and
// gets what transcribe() gives it on a model truncated to 750; a file beside it without the
// option keeps the full context, and the two windows take two encoder calls.
TEST(BatchTranscriber, FittedAudioContextTranscribesAsATruncatedModel) {
  if (!have_tiny_en()) GTEST_SKIP() << "no tiny.en model at " << model_dir();
  const auto model = tiny_en();
  EXPECT_EQ(fitted_audio_ctx(*model, 270), 750);    // 2.7 s + 2 s, at least 15 s
  EXPECT_EQ(fitted_audio_ctx(*model, 1300), 750);   // 13 s + 2 s: 15 s
  EXPECT_EQ(fitted_audio_ctx(*model, 1301), 1000);  // a frame more: 20 s
  EXPECT_EQ(fitted_audio_ctx(*model, 2600), 1500);  // 26 s + 2 s: the whole window
  EXPECT_EQ(fitted_audio_ctx(*model, 100 * 3000), 1500);
  LoadOptions lo;
  lo.audio_ctx = 750;
  const auto truncated = WhisperModel::load(model_dir(), lo);
  const auto& tok = english();
  const std::vector<float> speech = clip("english.wav"), jfk = clip("jfk.wav");
  TranscribeOptions fit;
  fit.fit_audio_ctx = true;
  WhisperSession short_solo(truncated), solo(model);
  const TranscribeResult want_short = transcribe(short_solo, tok, speech, TranscribeOptions{});
  const TranscribeResult want_full = transcribe(solo, tok, jfk, TranscribeOptions{});

  WhisperBatchSession batch(model, 2);
  BatchTranscriber t(batch, solo, tok);
  const uint64_t a = t.add(mel_of(speech), fit);
  const uint64_t b = t.add(mel_of(jfk), TranscribeOptions{});
  auto results = drain(t);
  ASSERT_TRUE(results[a].result.has_value());
  ASSERT_TRUE(results[b].result.has_value());
  expect_same(*results[a].result, want_short, "english.wav, fitted");
  expect_same(*results[b].result, want_full, "jfk.wav, full");
  EXPECT_EQ(t.stats().windows, 2);
  EXPECT_EQ(t.stats().batches, 2);  // one encoder call per context
  EXPECT_FALSE(results[a].result->text.empty());
}

TEST(BatchTranscriber, BadInputIsAClearErrorAndAddsNothing) {
  if (!have_tiny_en()) GTEST_SKIP() << "no tiny.en model at " << model_dir();
  WhisperBatchSession batch(tiny_en(), 1);
  WhisperSession solo(tiny_en());
  BatchTranscriber t(batch, solo, english());
  EXPECT_THROW(t.add(Tensor::zeros({80, 100}, DType::f32), {}), Error);
  TranscribeOptions bad;
  bad.beam_size = -1;
  EXPECT_THROW(t.add(mel_of(std::vector<float>(16000, 0.0f)), bad), Error);
  EXPECT_EQ(t.files(), 0);
}

}  // namespace
}  // namespace parley

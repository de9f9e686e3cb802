// Encoder context truncation (LoadOptions::audio_ctx, `--audio-ctx N`, whisper.cpp's
// audio_ctx) on the real tiny.en: the encoder's output shape, the leading 2N mel frames, the
// seek loop's shorter windows, and the range check.
#include <gtest/gtest.h>

#include <algorithm>
#include <string>
#include <vector>

#include "audio/decode.h"
#include "audio/mel.h"
#include "engine/error.h"
#include "whisper/model.h"
#include "whisper/transcribe.h"
#include "whisper_test_util.h"

namespace parley {
namespace {

using whisper_test::english;
using whisper_test::have_tiny_en;
using whisper_test::jfk_window;
using whisper_test::model_dir;

std::vector<float> host_rows(const Tensor& t) {
  const Tensor f =
      t.device() == Device::cpu && t.dtype() == DType::f32 ? t : t.to(Device::cpu).cast(DType::f32);
  return std::vector<float>(f.data<float>(), f.data<float>() + f.numel());
}

TEST(AudioCtx, OutOfRangeIsAClearError) {
  if (!have_tiny_en()) GTEST_SKIP() << "no tiny.en model at " << model_dir();
  for (int n : {1501, -1, 100000}) {
    LoadOptions o;
    o.audio_ctx = n;
    try {
      WhisperModel::load(model_dir(), o);
      FAIL() << "audio_ctx " << n << " loaded";
    } catch (const Error& e) {
      EXPECT_EQ(e.kind(), ErrorKind::invalid_argument);
      EXPECT_NE(std::string(e.what()).find("audio_ctx " + std::to_string(n) + " outside [1, 1500]"),
                std::string::npos)
          << e.what();
    }
  }
}

// The features are [N, d]; a 3000-frame window and its own first 2N frames encode alike.
TEST(AudioCtx, EncoderOutputIsNByDFromTheLeadingFrames) {
  if (!have_tiny_en()) GTEST_SKIP() << "no tiny.en model at " << model_dir();
  LoadOptions o;
  o.audio_ctx = 384;
  const auto model = WhisperModel::load(model_dir(), o);
  EXPECT_EQ(model->config().n_audio_ctx, 384);
  EXPECT_EQ(model->trained_audio_ctx(), 1500);
  EXPECT_EQ(whisper_window_frames(*model), 768);
  WhisperSession session(model);
  const Tensor window = jfk_window();  // [80, 3000]
  session.encode(window);
  ASSERT_EQ(session.audio_features().shape(), Shape({384, 384}));
  const std::vector<float> from_window = host_rows(session.audio_features());

  session.encode(pad_or_trim_frames(window, 768));  // the same frames, exactly 2N wide
  EXPECT_EQ(host_rows(session.audio_features()), from_window);
  // Frames 768.. (jfk's later words) must not matter; frames before must.
  Tensor other = pad_or_trim_frames(window, 3000);
  std::fill_n(other.data<float>() + 80 * 3000 - 100, 100, 0.5f);  // the last mel row's tail
  session.encode(other);
  EXPECT_EQ(host_rows(session.audio_features()), from_window);
  Tensor early = pad_or_trim_frames(window, 3000);
  early.data<float>()[10] = 0.9f;  // mel row 0, frame 10
  session.encode(early);
  EXPECT_NE(host_rows(session.audio_features()), from_window);

  // Fewer frames than the context: a clear error.
  EXPECT_THROW(session.encode(pad_or_trim_frames(window, 700)), Error);
}

// N covering the clip (jfk.wav is 11.0 s; 600 positions hear 12 s): one window, the words.
TEST(AudioCtx, CoveringContextKeepsTheJfkTranscript) {
  if (!have_tiny_en()) GTEST_SKIP() << "no tiny.en model at " << model_dir();
  LoadOptions o;
  o.audio_ctx = 600;
  const auto model = WhisperModel::load(model_dir(), o);
  WhisperSession session(model);
  const auto samples = load_audio(std::string(PARLEY_TEST_DATA) + "/audio/jfk.wav");
  const WhisperRunCounters before = whisper_run_counters();
  const TranscribeResult r = transcribe(session, english(), samples, TranscribeOptions{});
  EXPECT_EQ(whisper_run_counters().encoder_runs - before.encoder_runs, 1u);
  EXPECT_NE(r.text.find("ask not what your country can do for you"), std::string::npos) << r.text;
  EXPECT_NE(r.text.find("for your country"), std::string::npos) << r.text;
}

// N shorter than the clip: the seek loop cuts windows of 2N frames (7.68 s here), so the
// end of the speech is still heard rather than lost past the encoder's reach. (Quality
// drops when a window cuts through the speech: docs/DECODING.md.)
TEST(AudioCtx, ShortContextWindowsCoverTheWholeClip) {
  if (!have_tiny_en()) GTEST_SKIP() << "no tiny.en model at " << model_dir();
  LoadOptions o;
  o.audio_ctx = 384;
  const auto model = WhisperModel::load(model_dir(), o);
  WhisperSession session(model);
  const auto samples = load_audio(std::string(PARLEY_TEST_DATA) + "/audio/jfk.wav");
  const TranscribeResult r = transcribe(session, english(), samples, TranscribeOptions{});
  ASSERT_GE(r.segments.size(), 2u);
  EXPECT_NE(r.text.find("ask not what your country can do for you"), std::string::npos) << r.text;
  // The last words lie past the first window's 7.68 s: a second window heard them.
  EXPECT_NE(r.text.find("do for your country"), std::string::npos) << r.text;
  EXPECT_GT(r.segments.back().start, 7.0);
  EXPECT_GT(r.segments.back().seek, 0);
}

}  // namespace
}  // namespace parley

// AudioSessions without a model: the raw-PCM WAV wrapper, the spool (reload after a
// restart, corrupt folders skipped), limits, idle expiry and errors. The transcripts themselves are
// checked end to end against the real tiny.en in test_sessions.py; the capture jobs' rule (whole
// windows only) in transcribe_test.cpp (TranscribeClips.CompleteWindowsOnly...).
#include "serving/audio_sessions.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <future>

#include "audio/decode.h"
#include "engine/error.h"

namespace parley {
namespace {

namespace fs = std::filesystem;

TEST(SessionWav, WrapsRawPcmForTheDecoder) {
  const std::vector<int16_t> pcm = {0, 1000, -1000, 32767, -32768};
  std::vector<uint8_t> bytes(reinterpret_cast<const uint8_t*>(pcm.data()),
                             reinterpret_cast<const uint8_t*>(pcm.data()) + pcm.size() * 2);
  bytes.push_back(7);  // half a sample: left out
  const auto wav = wav_file(bytes, SessionInput::pcm16, 16000);
  const auto samples = decode_audio(wav, "x.wav");
  ASSERT_EQ(samples.size(), pcm.size());
  for (size_t i = 0; i < pcm.size(); ++i) EXPECT_EQ(samples[i], float(pcm[i]) / 32768.0f);

  // f32 at 8 kHz comes out at 16 kHz (FFmpeg's resampler, as a file would).
  std::vector<float> f(8000, 0.25f);
  const auto fwav =
      wav_file({reinterpret_cast<const uint8_t*>(f.data()), f.size() * 4}, SessionInput::f32, 8000);
  const auto up = decode_audio(fwav, "y.wav");
  EXPECT_NEAR(double(up.size()), 16000.0, 64.0);
  EXPECT_NEAR(up[8000], 0.25f, 1e-3f);
}

class AudioSessionsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() /
           ("parley_sessions_test_" + std::to_string(::getpid()) + "_" +
            ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::remove_all(dir_);
    ServiceOptions s;
    s.model_dir = "/nonexistent/model";  // per-request: never loaded, no job is submitted
    s.residency = Residency::per_request;
    service_ = std::make_unique<WhisperService>(s);
  }
  void TearDown() override { fs::remove_all(dir_); }

  AudioSessionsOptions options() const {
    AudioSessionsOptions o;
    o.dir = dir_.string();
    o.capture_step_s = 1e9;  // no transcription during capture here
    o.agree_min_s = 1e9;
    return o;
  }
  static SessionConfig pcm() {
    SessionConfig c;
    c.model = "whisper-1";
    c.input = SessionInput::pcm16;
    c.sample_rate = 16000;
    c.prompt = "Hello.";
    return c;
  }
  static std::vector<uint8_t> chunk(size_t n) { return std::vector<uint8_t>(n, 1); }

  fs::path dir_;
  std::unique_ptr<WhisperService> service_;
};

TEST_F(AudioSessionsTest, SpoolSurvivesARestartAndCorruptFoldersAreSkipped) {
  std::string id, agreed_id;
  {
    AudioSessions a(options(), *service_);
    id = a.create(pcm()).id;
    EXPECT_EQ(a.status(id).config.commit, SessionCommit::windows);  // the server's default
    SessionConfig w = pcm();
    w.commit = SessionCommit::agreed;
    agreed_id = a.create(w).id;
    a.append(id, chunk(1000));
    EXPECT_EQ(a.append(id, chunk(601)).bytes_received, 1601u);
  }
  // A folder with a truncated meta.json, one with none, and one with garbage.
  fs::create_directories(dir_ / "sess_truncated");
  std::ofstream(dir_ / "sess_truncated" / "meta.json") << R"({"version": 1, "id": "sess_tr)";
  fs::create_directories(dir_ / "sess_nometa");
  fs::create_directories(dir_ / "sess_garbage");
  std::ofstream(dir_ / "sess_garbage" / "meta.json") << "\x01\x02 not json";

  AudioSessions b(options(), *service_);
  EXPECT_EQ(b.reloaded(), 2);
  EXPECT_EQ(b.skipped(), 3);
  const SessionStatus s = b.status(id);
  EXPECT_EQ(s.bytes_received, 1601u);
  EXPECT_EQ(s.state, "open");
  EXPECT_EQ(s.config.input, SessionInput::pcm16);
  EXPECT_EQ(s.config.prompt.value_or(""), "Hello.");
  EXPECT_EQ(s.config.commit, SessionCommit::windows);
  EXPECT_EQ(b.status(agreed_id).config.commit, SessionCommit::agreed);
  EXPECT_EQ(b.append(id, chunk(9)).bytes_received, 1610u);
  EXPECT_EQ(fs::file_size(dir_ / id / "audio.bin"), 1610u);
}

TEST_F(AudioSessionsTest, LimitsAndErrors) {
  AudioSessionsOptions o = options();
  o.max_sessions = 2;
  o.max_session_bytes = 100;
  AudioSessions a(o, *service_);
  const std::string id = a.create(pcm()).id;
  a.create(pcm());
  try {
    a.create(pcm());
    FAIL() << "a third session was created";
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), ErrorKind::resource_exhausted);
  }
  a.append(id, chunk(60));
  try {
    a.append(id, chunk(41));
    FAIL() << "the session went over its byte limit";
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), ErrorKind::resource_exhausted);
  }
  EXPECT_EQ(a.append(id, chunk(40)).bytes_received, 100u);  // still usable, nothing lost

  for (const std::string bad : {"sess_unknown", "../etc", "", "sess_/x"}) {
    try {
      a.status(bad);
      FAIL() << bad;
    } catch (const Error& e) {
      EXPECT_EQ(e.kind(), ErrorKind::not_found) << bad;
    }
  }
  EXPECT_THROW(a.append(id, {}), Error);  // an empty chunk

  a.remove(id);
  EXPECT_FALSE(fs::exists(dir_ / id));
  EXPECT_THROW(a.status(id), Error);
  a.create(pcm());  // the deleted one's place is free again
}

TEST_F(AudioSessionsTest, IdleSessionsExpire) {
  AudioSessionsOptions o = options();
  o.idle_timeout_s = 5;
  AudioSessions a(o, *service_);
  const std::string id = a.create(pcm()).id;
  a.append(id, chunk(10));
  const auto now = std::chrono::steady_clock::now();
  EXPECT_EQ(a.expire_idle(now), 0);
  EXPECT_EQ(a.expire_idle(now + std::chrono::seconds(6)), 1);
  EXPECT_FALSE(fs::exists(dir_ / id));
  EXPECT_THROW(a.status(id), Error);
}

TEST_F(AudioSessionsTest, ClosingAnEmptySessionFailsAndKeepsItOpen) {
  AudioSessions a(options(), *service_);
  const std::string id = a.create(pcm()).id;
  std::promise<std::exception_ptr> p;
  a.close(id, [&](std::shared_ptr<const SessionResult> r, std::exception_ptr ep) {
    EXPECT_EQ(r, nullptr);
    p.set_value(ep);
  });
  auto f = p.get_future();
  ASSERT_EQ(f.wait_for(std::chrono::seconds(10)), std::future_status::ready);
  const std::exception_ptr ep = f.get();
  ASSERT_TRUE(ep);
  try {
    std::rethrow_exception(ep);
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), ErrorKind::invalid_argument);
    EXPECT_NE(std::string(e.what()).find("no audio"), std::string::npos) << e.what();
  }
  EXPECT_EQ(a.status(id).state, "open");
  EXPECT_EQ(a.append(id, chunk(4)).bytes_received, 4u);
}

}  // namespace
}  // namespace parley

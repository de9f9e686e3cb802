// WhisperService as a continuous batch (serving/whisper_service.h) on the real tiny.en, CPU:
// concurrent requests of different lengths and options, one arriving mid-run with streaming
// deltas and one cancelled mid-run, each get the transcript transcribe() gives them alone,
// and their windows share encoder calls; a full queue refuses; background jobs (interim
// text) wait behind every other queued job, give a running slot up to one, and run in their
// own few slots.
#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <condition_variable>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <mutex>
#include <string>
#include <vector>

#include "audio/decode.h"
#include "engine/error.h"
#include "serving/whisper_service.h"
#include "whisper/model.h"
#include "whisper/tokenizer.h"
#include "whisper/transcribe.h"

namespace parley {
namespace {

const std::string kModel = PARLEY_TEST_MODEL_DIR;
bool have_model() { return std::filesystem::exists(kModel + "/model.bin"); }

std::vector<uint8_t> file_bytes(const std::string& name) {
  std::ifstream in(std::string(PARLEY_TEST_DATA) + "/audio/" + name, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), {}};
}

// 16 kHz mono 16-bit PCM WAV of `samples`.
std::vector<uint8_t> wav(const std::vector<float>& samples) {
  const uint32_t data = uint32_t(samples.size() * 2);
  std::vector<uint8_t> out(44 + data);
  auto put32 = [&](size_t at, uint32_t v) { std::memcpy(&out[at], &v, 4); };
  auto put16 = [&](size_t at, uint16_t v) { std::memcpy(&out[at], &v, 2); };
  std::memcpy(&out[0], "RIFF", 4);
  put32(4, 36 + data);
  std::memcpy(&out[8], "WAVEfmt ", 8);
  put32(16, 16);
  put16(20, 1);
  put16(22, 1);
  put32(24, 16000);
  put32(28, 32000);
  put16(32, 2);
  put16(34, 16);
  std::memcpy(&out[36], "data", 4);
  put32(40, data);
  for (size_t i = 0; i < samples.size(); ++i) {
    const float v = std::max(-1.0f, std::min(1.0f, samples[i]));
    put16(44 + 2 * i, uint16_t(int16_t(std::lround(v * 32767.0f))));
  }
  return out;
}

// A job and what came back for it.
struct Request {
  std::string name;
  std::shared_ptr<TranscriptionJob> job = std::make_shared<TranscriptionJob>();
  std::mutex mu;
  std::condition_variable cv;
  bool done = false;
  std::optional<TranscribeResult> result;
  std::exception_ptr error;
  std::string deltas;

  Request(std::string n, std::vector<uint8_t> audio, TranscribeOptions o = {})
      : name(std::move(n)) {
    job->audio = std::move(audio);
    job->filename = name + ".wav";
    job->options = std::move(o);
    job->vad = false;
    job->on_done = [this](const TranscribeResult* r, double, std::exception_ptr e) {
      std::lock_guard lock(mu);
      if (r) result = *r;
      error = e;
      done = true;
      cv.notify_all();
    };
  }
  void stream() {
    job->on_delta = [this](const std::string& d) {
      std::lock_guard lock(mu);
      deltas += d;
      cv.notify_all();
    };
  }
  // Waits (at most 60 s) until `pred` holds under the lock.
  template <class Pred>
  bool wait(Pred pred) {
    std::unique_lock lock(mu);
    return cv.wait_for(lock, std::chrono::seconds(60), pred);
  }
  bool wait_done() {
    return wait([&] { return done; });
  }
};

TranscribeResult alone(const Request& r, const TranscribeOptions& o) {
  static const auto model = WhisperModel::load(kModel);
  static const WhisperTokenizer tok = load_tokenizer(*model);
  WhisperSession session(model);
  return transcribe(session, tok, decode_audio(r.job->audio, r.job->filename), o);
}

TEST(WhisperServiceBatch, ConcurrentRequestsShareStepsAndGetTheirOwnTranscripts) {
  if (!have_model()) GTEST_SKIP() << "no tiny.en model at " << kModel;
  const std::vector<float> jfk = decode_audio(file_bytes("jfk.wav"), "jfk.wav");
  std::vector<float> jfk3 = jfk;  // 33 s: two windows, the second with a previous-text prompt
  jfk3.insert(jfk3.end(), jfk.begin(), jfk.end());
  jfk3.insert(jfk3.end(), jfk.begin(), jfk.end());
  TranscribeOptions prompted;
  prompted.initial_prompt = "President Kennedy's inaugural address.";
  TranscribeOptions plain;
  plain.without_timestamps = true;
  plain.temperatures = {0.0f};

  std::vector<std::unique_ptr<Request>> rs;
  rs.push_back(std::make_unique<Request>("jfk3", wav(jfk3)));
  rs.push_back(std::make_unique<Request>("stereo", file_bytes("stereo_diarization.wav")));
  rs.push_back(std::make_unique<Request>("jfk_prompted", file_bytes("jfk.wav"), prompted));
  rs.push_back(
      std::make_unique<Request>("head", wav({jfk.begin(), jfk.begin() + 4 * 16000}), plain));
  rs.push_back(std::make_unique<Request>("cancelled", wav(jfk3)));
  rs[4]->stream();
  auto late = std::make_unique<Request>("late", file_bytes("jfk.wav"));  // joins mid-run
  late->stream();
  std::vector<TranscribeResult> expected;
  for (auto& r : rs) expected.push_back(alone(*r, r->job->options));
  const TranscribeResult expected_late = alone(*late, {});

  ServiceOptions so;
  so.model_dir = kModel;
  so.batch = 8;
  WhisperService service(so);
  for (auto& r : rs) ASSERT_TRUE(service.submit(r->job)) << r->name;
  // The stream of the one to cancel has started: the batch is mid-window.
  ASSERT_TRUE(rs[4]->wait([&] { return !rs[4]->deltas.empty(); }));
  ASSERT_TRUE(service.submit(late->job));
  rs[4]->job->cancelled = true;
  rs.push_back(std::move(late));
  expected.push_back(expected_late);

  for (size_t i = 0; i < rs.size(); ++i) {
    Request& r = *rs[i];
    ASSERT_TRUE(r.wait_done()) << r.name;
    if (r.name == "cancelled") {
      ASSERT_TRUE(r.error) << "finished before the cancel";
      try {
        std::rethrow_exception(r.error);
      } catch (const Error& e) {
        EXPECT_EQ(e.kind(), ErrorKind::cancelled);
      }
      continue;
    }
    ASSERT_TRUE(r.result) << r.name;
    EXPECT_EQ(r.result->text, expected[i].text) << r.name;
    ASSERT_EQ(r.result->segments.size(), expected[i].segments.size()) << r.name;
    for (size_t s = 0; s < expected[i].segments.size(); ++s)
      EXPECT_EQ(r.result->segments[s].tokens, expected[i].segments[s].tokens) << r.name;
  }
  // The streamed text is the transcript.
  EXPECT_EQ(rs.back()->deltas, rs.back()->result->text);
  EXPECT_GT(expected[0].segments.back().seek, 0);  // jfk3's second window happened
  const ServiceStats st = service.stats();
  EXPECT_EQ(st.running, 0);
  EXPECT_GE(st.windows, 6u);
  EXPECT_LT(st.encoder_batches, st.windows);  // windows of different requests shared encodes
  EXPECT_GT(st.decoder_steps, 0u);
  std::printf("%llu windows in %llu encoder calls, %llu decoder steps\n",
              (unsigned long long)st.windows, (unsigned long long)st.encoder_batches,
              (unsigned long long)st.decoder_steps);
}

TEST(WhisperServiceBatch, AFullQueueRefusesAndBadAudioIsAnErrorWhileOthersFinish) {
  if (!have_model()) GTEST_SKIP() << "no tiny.en model at " << kModel;
  ServiceOptions so;
  so.model_dir = kModel;
  so.batch = 2;
  so.queue_capacity = 0;
  WhisperService service(so);
  Request a("a", file_bytes("stereo_diarization.wav"));
  Request bad("bad", std::vector<uint8_t>{'n', 'o', 't', ' ', 'a', 'u', 'd', 'i', 'o'});
  Request c("c", file_bytes("stereo_diarization.wav"));
  ASSERT_TRUE(service.submit(a.job));
  ASSERT_TRUE(service.submit(bad.job));
  EXPECT_FALSE(service.submit(c.job));  // two running or about to: no room, no queue
  ASSERT_TRUE(a.wait_done());
  ASSERT_TRUE(bad.wait_done());
  EXPECT_TRUE(a.result.has_value());
  EXPECT_FALSE(a.result->text.empty());
  EXPECT_TRUE(bad.error);
  EXPECT_EQ(service.stats().running, 0);
  ServiceOptions zero = so;
  zero.batch = 0;
  EXPECT_THROW(WhisperService{zero}, Error);
}

// --sample-len: every job decodes at most that many tokens per window (a smaller limit of its
// own stays), and gets what transcribe() gives alone with that limit.
TEST(WhisperServiceBatch, SampleLenCapsEveryJobsWindows) {
  if (!have_model()) GTEST_SKIP() << "no tiny.en model at " << kModel;
  ServiceOptions so;
  so.model_dir = kModel;
  so.batch = 2;
  so.max_sample_len = 8;
  WhisperService service(so);
  TranscribeOptions own;
  own.sample_len = 5;
  Request capped("capped", file_bytes("jfk.wav")), smaller("smaller", file_bytes("jfk.wav"), own);
  ASSERT_TRUE(service.submit(capped.job));
  ASSERT_TRUE(service.submit(smaller.job));
  ASSERT_TRUE(capped.wait_done());
  ASSERT_TRUE(smaller.wait_done());
  ASSERT_TRUE(capped.result && smaller.result);
  for (auto [r, n] : {std::pair{&capped, 8}, std::pair{&smaller, 5}}) {
    TranscribeOptions o;
    o.sample_len = n;
    const TranscribeResult want = alone(Request(r->name, file_bytes("jfk.wav")), o);
    EXPECT_EQ(r->result->text, want.text) << r->name;
    EXPECT_FALSE(r->result->segments.empty()) << r->name;
    for (const auto& seg : r->result->segments)  // a segment lies in one window
      EXPECT_LE(seg.tokens.size(), size_t(n)) << r->name;
  }
  EXPECT_NE(capped.result->text, smaller.result->text);
  ServiceOptions bad = so;
  bad.max_sample_len = -1;
  EXPECT_THROW(WhisperService{bad}, Error);
}

TEST(WhisperServiceBatch, BackgroundJobsWaitBehindEveryOtherQueuedJob) {
  if (!have_model()) GTEST_SKIP() << "no tiny.en model at " << kModel;
  ServiceOptions so;
  so.model_dir = kModel;
  so.batch = 1;  // one at a time: the order they finish is the order they were taken
  WhisperService service(so);
  std::mutex mu;
  std::vector<std::string> order;
  std::vector<std::unique_ptr<Request>> rs;
  for (const char* name : {"first", "interim1", "interim2", "committed", "file"}) {
    rs.push_back(std::make_unique<Request>(name, file_bytes("english.wav")));
    Request& r = *rs.back();
    r.job->background = r.name.rfind("interim", 0) == 0;
    auto done = r.job->on_done;
    r.job->on_done = [&, done, name = r.name](const TranscribeResult* res, double s,
                                              std::exception_ptr e) {
      {
        std::lock_guard lock(mu);
        order.push_back(name);
      }
      done(res, s, e);
    };
  }
  // "first" is taken at once; the others queue behind it in this order.
  for (auto& r : rs) ASSERT_TRUE(service.submit(r->job));
  for (auto& r : rs) ASSERT_TRUE(r->wait_done()) << r->name;
  for (auto& r : rs) EXPECT_FALSE(r->error) << r->name;
  // The engine may have taken "first" before the rest were queued, or all of them at its
  // first look: either way the foreground jobs come before the background ones, which keep
  // their own order.
  const std::vector<std::string> want = {"first", "committed", "file", "interim1", "interim2"};
  EXPECT_EQ(order, want);
}

TEST(WhisperServiceBatch, ARunningBackgroundJobYieldsItsSlotToAWaitingJob) {
  if (!have_model()) GTEST_SKIP() << "no tiny.en model at " << kModel;
  ServiceOptions so;
  so.model_dir = kModel;
  so.batch = 1;
  WhisperService service(so);
  const std::vector<float> jfk = decode_audio(file_bytes("jfk.wav"), "jfk.wav");
  std::vector<float> long_audio;  // 99 s: four windows, far longer than the test waits
  for (int i = 0; i < 9; ++i) long_audio.insert(long_audio.end(), jfk.begin(), jfk.end());
  Request interim("interim", wav(long_audio));
  interim.job->background = true;
  interim.stream();
  ASSERT_TRUE(service.submit(interim.job));
  // Running: its first text has come.
  ASSERT_TRUE(interim.wait([&] { return !interim.deltas.empty(); }));
  Request turn("turn", file_bytes("english.wav"));
  ASSERT_TRUE(service.submit(turn.job));
  ASSERT_TRUE(interim.wait_done());
  ASSERT_TRUE(turn.wait_done());
  EXPECT_TRUE(interim.error);  // cancelled at its next step
  EXPECT_FALSE(interim.result.has_value());
  ASSERT_FALSE(turn.error);
  EXPECT_FALSE(turn.result->text.empty());
  EXPECT_EQ(service.stats().background_yielded, 1u);
  // With a slot free, a background job runs to its end.
  Request alone_bg("alone", file_bytes("english.wav"));
  alone_bg.job->background = true;
  ASSERT_TRUE(service.submit(alone_bg.job));
  ASSERT_TRUE(alone_bg.wait_done());
  EXPECT_FALSE(alone_bg.error);
  EXPECT_EQ(service.stats().background_yielded, 1u);
}

// ServiceOptions::background_slots: however many batch slots are free, at most that many
// background jobs run at once. A job counts as running from its first text (jfk.wav's first
// segment ends mid-window at temperature 0) to its answer; with every slot open the three
// overlap, which shows the measure sees overlap.
TEST(WhisperServiceBatch, BackgroundJobsRunInTheirOwnSlots) {
  if (!have_model()) GTEST_SKIP() << "no tiny.en model at " << kModel;
  TranscribeOptions greedy;
  greedy.temperatures = {0.0f};
  for (const int slots : {1, 4}) {
    ServiceOptions so;
    so.model_dir = kModel;
    so.batch = 4;
    so.background_slots = slots;
    WhisperService service(so);
    std::mutex mu;
    int running = 0, peak = 0;
    std::vector<std::unique_ptr<Request>> rs;
    for (const char* name : {"interim0", "interim1", "interim2"}) {
      rs.push_back(std::make_unique<Request>(name, file_bytes("jfk.wav"), greedy));
      Request& r = *rs.back();
      r.job->background = true;
      r.job->on_delta = [&, started = false](const std::string&) mutable {
        if (started) return;
        started = true;
        std::lock_guard lock(mu);
        peak = std::max(peak, ++running);
      };
      auto done = r.job->on_done;
      r.job->on_done = [&, done](const TranscribeResult* res, double sec, std::exception_ptr e) {
        {
          std::lock_guard lock(mu);
          --running;
        }
        done(res, sec, e);
      };
    }
    for (auto& r : rs) ASSERT_TRUE(service.submit(r->job));
    for (auto& r : rs) ASSERT_TRUE(r->wait_done()) << r->name;
    for (auto& r : rs) {
      ASSERT_FALSE(r->error) << r->name;
      EXPECT_EQ(r->result->segments.size(), 2u) << r->name;
    }
    if (slots == 1)
      EXPECT_EQ(peak, 1);
    else
      EXPECT_GE(peak, 2);
  }
  ServiceOptions bad;
  bad.model_dir = kModel;
  bad.background_slots = -1;
  EXPECT_THROW(WhisperService{bad}, Error);
}

}  // namespace
}  // namespace parley

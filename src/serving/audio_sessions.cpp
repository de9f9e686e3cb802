#include "serving/audio_sessions.h"

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <nlohmann/json.hpp>
#include <random>

#include "audio/decode.h"
#include "engine/error.h"

namespace parley {
namespace fs = std::filesystem;
using Clock = std::chrono::steady_clock;

namespace {

constexpr int kRate = 16000;
constexpr int64_t kHop = 160;          // samples per mel frame
constexpr size_t kPromptTokens = 448;  // more than the seek loop keeps (223)
constexpr size_t kPromptChars = 4000;  // far more than the seek loop's 223 prompt tokens
constexpr const char* kShuttingDown =
    "[sessions] the server is shutting down; the session is kept: close it again after the "
    "restart";

const char* input_name(SessionInput i) {
  switch (i) {
    case SessionInput::pcm16: return "pcm16";
    case SessionInput::f32: return "f32";
    default: return "container";
  }
}

SessionInput input_from_name(const std::string& s) {
  if (s == "pcm16") return SessionInput::pcm16;
  if (s == "f32") return SessionInput::f32;
  check_arg(s == "container", "[sessions] unknown input format '" + s + "'");
  return SessionInput::container;
}

void put_u32(std::vector<uint8_t>& out, uint32_t v) {
  for (int i = 0; i < 4; ++i) out.push_back(uint8_t(v >> (8 * i)));
}
void put_u16(std::vector<uint8_t>& out, uint16_t v) {
  out.push_back(uint8_t(v));
  out.push_back(uint8_t(v >> 8));
}

// A RIFF WAV header for `data_bytes` of mono samples; format 1 (PCM) or 3 (IEEE float).
std::vector<uint8_t> wav_header(uint32_t data_bytes, uint16_t format, uint16_t bits, int rate) {
  std::vector<uint8_t> h;
  h.reserve(44 + size_t(data_bytes));
  for (char c : std::string("RIFF")) h.push_back(uint8_t(c));
  put_u32(h, 36 + data_bytes);
  for (char c : std::string("WAVEfmt ")) h.push_back(uint8_t(c));
  put_u32(h, 16);
  put_u16(h, format);
  put_u16(h, 1);  // mono
  put_u32(h, uint32_t(rate));
  put_u32(h, uint32_t(rate) * bits / 8);
  put_u16(h, bits / 8);
  put_u16(h, bits);
  for (char c : std::string("data")) h.push_back(uint8_t(c));
  put_u32(h, data_bytes);
  return h;
}

// 16 kHz samples (decode_audio's output: multiples of 1/32768) as a 16-bit WAV: lossless.
std::vector<uint8_t> samples_wav(std::span<const float> samples) {
  std::vector<uint8_t> out = wav_header(uint32_t(samples.size() * 2), 1, 16, kRate);
  for (float x : samples) {
    const long v = std::clamp(std::lround(double(x) * 32768.0), -32768L, 32767L);
    put_u16(out, uint16_t(int16_t(v)));
  }
  return out;
}

std::string new_session_id() {
  std::random_device rd;
  static const char* hex = "0123456789abcdef";
  std::string id = "sess_";
  for (int i = 0; i < 3; ++i) {
    const uint32_t r = rd();
    for (int k = 0; k < 8; ++k) id += hex[(r >> (4 * k)) & 15];
  }
  return id;
}

bool valid_id(const std::string& id) {
  return id.size() > 5 && id.size() < 64 && id.starts_with("sess_") &&
         std::all_of(id.begin(), id.end(), [](char c) {
           return (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '_';
         });
}

int64_t unix_now() {
  return std::chrono::duration_cast<std::chrono::seconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

nlohmann::json segment_json(const Segment& s) {
  return {{"seek", s.seek},
          {"start", s.start},
          {"end", s.end},
          {"text", s.text},
          {"tokens", s.tokens},
          {"temperature", s.temperature},
          {"avg_logprob", s.avg_logprob},
          {"compression_ratio", s.compression_ratio},
          {"no_speech_prob", s.no_speech_prob}};
}

Segment segment_from_json(const nlohmann::json& j) {
  Segment s;
  s.seek = j.at("seek").get<int>();
  s.start = j.at("start").get<double>();
  s.end = j.at("end").get<double>();
  s.text = j.at("text").get<std::string>();
  s.tokens = j.at("tokens").get<std::vector<int32_t>>();
  s.temperature = j.at("temperature").get<float>();
  s.avg_logprob = j.at("avg_logprob").get<float>();
  s.compression_ratio = j.at("compression_ratio").get<float>();
  s.no_speech_prob = j.at("no_speech_prob").get<float>();
  return s;
}

void fsync_path(const fs::path& p, int flags) {
  const int fd = ::open(p.c_str(), flags);
  if (fd < 0) return;
  ::fsync(fd);
  ::close(fd);
}

// Writes `text` to `path` so that a crash leaves either the old or the new file.
void write_atomically(const fs::path& path, const std::string& text) {
  const fs::path tmp = path.string() + ".tmp";
  const int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  check(fd >= 0, ErrorKind::internal,
        "[sessions] cannot write " + tmp.string() + ": " + std::strerror(errno));
  size_t done = 0;
  while (done < text.size()) {
    const ssize_t n = ::write(fd, text.data() + done, text.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {
      ::close(fd);
      throw Error(ErrorKind::internal,
                  "[sessions] cannot write " + tmp.string() + ": " + std::strerror(errno));
    }
    done += size_t(n);
  }
  ::fsync(fd);
  ::close(fd);
  fs::rename(tmp, path);
  fsync_path(path.parent_path(), O_RDONLY | O_DIRECTORY);
}

std::vector<uint8_t> read_prefix(const fs::path& path, uint64_t bytes) {
  std::vector<uint8_t> out(bytes);
  std::ifstream in(path, std::ios::binary);
  check(bool(in), ErrorKind::internal, "[sessions] cannot read " + path.string());
  in.read(reinterpret_cast<char*>(out.data()), std::streamsize(bytes));
  out.resize(size_t(in.gcount()));
  return out;
}

// A segment's text as the agreement compares it: ASCII letters lower-cased and digits,
// every other byte of UTF-8 kept; spaces and ASCII punctuation dropped (two passes over the
// same words differ in them most).
std::string agreement_text(std::string_view text) {
  std::string out;
  for (const char ch : text) {
    const auto c = uint8_t(ch);
    if (c >= 0x80 || std::isdigit(c))
      out += ch;
    else if (std::isalpha(c))
      out += char(std::tolower(c));
  }
  return out;
}

}  // namespace

const char* commit_name(SessionCommit c) {
  return c == SessionCommit::agreed ? "agreed" : "windows";
}

SessionCommit commit_from_name(const std::string& s) {
  if (s == "agreed") return SessionCommit::agreed;
  check_arg(s == "windows",
            "[sessions] 'commit' must be 'agreed' (segments two passes agree on, "
            "committed while the audio arrives) or 'windows' (whole 30 s "
            "windows only: the offline transcript); got '" +
                s + "'");
  return SessionCommit::windows;
}

std::vector<uint8_t> wav_file(std::span<const uint8_t> pcm, SessionInput format, int sample_rate) {
  check_arg(format != SessionInput::container, "[sessions] wav_file: raw PCM formats only");
  const size_t width = format == SessionInput::pcm16 ? 2 : 4;
  const size_t n = pcm.size() / width * width;
  std::vector<uint8_t> out = wav_header(uint32_t(n), format == SessionInput::pcm16 ? 1 : 3,
                                        uint16_t(width * 8), sample_rate);
  out.insert(out.end(), pcm.begin(), pcm.begin() + int64_t(n));
  return out;
}

struct AudioSessions::Entry {
  std::string id;
  fs::path dir;
  SessionConfig config;
  int64_t created_at = 0;
  std::string state = "open";  // open | closing | completed
  uint64_t bytes = 0;          // spooled, acknowledged
  std::mutex io_mu;            // one append at a time
  uint64_t decoded_bytes = 0;  // bytes at the last decode
  int64_t samples_received = 0;
  int64_t committed_samples = 0;  // the seek, 16 kHz samples (a multiple of kHop)
  std::vector<Segment> committed;
  size_t prompt_from = 0;  // committed[prompt_from:] is the prompt (the seek loop's reset)
  // SessionCommit::agreed: the last tail pass's segments past the seek (absolute times),
  // the spooled bytes it read (0: none since the seek last moved by whole windows) and the
  // samples they decoded to; where the last tail pass ended, samples.
  std::vector<Segment> hypothesis;
  uint64_t hypothesis_bytes = 0;
  int64_t hypothesis_samples = 0;
  int64_t last_tail_samples = 0;
  std::string language;
  bool job_running = false;
  JobKind job_kind = JobKind::windows;  // the running job's
  uint64_t job_bytes = 0;               // the spooled bytes the running job read

  bool agreed() const { return config.commit == SessionCommit::agreed; }
  std::shared_ptr<TranscriptionJob> job;
  std::vector<SessionDone> waiters;
  std::shared_ptr<const SessionResult> final;
  Clock::time_point last_active = Clock::now();
  bool removed = false;

  fs::path audio_path() const { return dir / "audio.bin"; }
};

AudioSessions::AudioSessions(AudioSessionsOptions options, WhisperService& service)
    : options_(std::move(options)), service_(service) {
  check_arg(!options_.dir.empty(), "[sessions] --sessions-dir must not be empty");
  check_arg(options_.idle_timeout_s > 0, "[sessions] --session-idle-timeout must be positive");
  check_arg(options_.max_sessions >= 1, "[sessions] --max-sessions must be at least 1");
  check_arg(options_.max_session_bytes >= 1, "[sessions] --max-session-mb must be positive");
  std::error_code ec;
  fs::create_directories(options_.dir, ec);
  check(!ec && fs::is_directory(options_.dir), ErrorKind::invalid_argument,
        "[sessions] cannot use " + options_.dir + " as the sessions directory: " + ec.message());
  load_dir();
  background_ = std::thread([this] { run_background(); });
}

AudioSessions::~AudioSessions() {
  stop();
  std::vector<std::shared_ptr<TranscriptionJob>> jobs;
  std::unique_lock lock(mu_);
  for (auto& [id, e] : sessions_) {
    if (e->job) e->job->cancelled = true;
  }
  // The jobs' callbacks refer to this object: wait for them (a cancelled job ends quickly).
  cv_.wait(lock, [&] { return jobs_in_flight_ == 0; });
}

void AudioSessions::stop() {
  std::vector<SessionDone> failed;
  {
    std::lock_guard lock(mu_);
    if (stopping_) return;
    stopping_ = true;
    for (auto& [id, e] : sessions_) {
      if (e->state == "closing" && !(e->job_running && e->job_kind == JobKind::final)) {
        for (auto& w : e->waiters) failed.push_back(std::move(w));
        e->waiters.clear();
        e->state = "open";
      }
    }
  }
  cv_.notify_all();
  if (background_.joinable()) background_.join();
  const auto err = std::make_exception_ptr(Error(ErrorKind::cancelled, kShuttingDown));
  for (auto& w : failed) w(nullptr, err);
}

int AudioSessions::open_count() const {
  std::lock_guard lock(mu_);
  return int(std::count_if(sessions_.begin(), sessions_.end(),
                           [](const auto& kv) { return kv.second->state != "completed"; }));
}

void AudioSessions::load_dir() {
  for (const auto& d : fs::directory_iterator(options_.dir)) {
    if (!d.is_directory()) continue;
    const std::string id = d.path().filename().string();
    if (!valid_id(id)) continue;
    try {
      std::ifstream in(d.path() / "meta.json");
      check(bool(in), ErrorKind::invalid_argument, "no meta.json");
      const nlohmann::json j = nlohmann::json::parse(in);
      auto e = std::make_shared<Entry>();
      e->id = id;
      e->dir = d.path();
      check(j.at("id").get<std::string>() == id, ErrorKind::invalid_argument, "id mismatch");
      const auto& c = j.at("config");
      e->config.model = c.at("model").get<std::string>();
      if (c.contains("language")) e->config.language = c["language"].get<std::string>();
      if (c.contains("prompt")) e->config.prompt = c["prompt"].get<std::string>();
      e->config.temperature = c.at("temperature").get<float>();
      e->config.response_format = c.at("response_format").get<std::string>();
      e->config.input = input_from_name(c.at("input_format").get<std::string>());
      e->config.sample_rate = c.at("sample_rate").get<int>();
      e->config.filename = c.at("filename").get<std::string>();
      // Sessions spooled before the field existed committed whole windows only.
      e->config.commit = commit_from_name(c.value("commit", std::string("windows")));
      e->created_at = j.at("created_at").get<int64_t>();
      e->state = j.at("state").get<std::string>();
      check(e->state == "open" || e->state == "completed", ErrorKind::invalid_argument,
            "bad state");
      e->committed_samples = j.at("committed_samples").get<int64_t>();
      e->prompt_from = j.at("prompt_from").get<size_t>();
      e->language = j.at("language").get<std::string>();
      for (const auto& s : j.at("segments")) e->committed.push_back(segment_from_json(s));
      check(e->prompt_from <= e->committed.size() && e->committed_samples >= 0 &&
                e->committed_samples % kHop == 0,
            ErrorKind::invalid_argument, "inconsistent seek");
      if (e->state == "completed") {
        auto r = std::make_shared<SessionResult>();
        r->config = e->config;
        r->duration = j.at("duration").get<double>();
        r->result.language = e->language;
        r->result.segments = e->committed;
        for (size_t i = 0; i < r->result.segments.size(); ++i) {
          r->result.segments[i].id = int(i);
          r->result.text += r->result.segments[i].text;
        }
        e->final = r;
      } else {
        check(fs::is_regular_file(e->audio_path()), ErrorKind::invalid_argument, "no audio.bin");
        e->bytes = fs::file_size(e->audio_path());
      }
      sessions_[id] = e;
      ++reloaded_;
    } catch (const std::exception& ex) {
      ++skipped_;
      std::cerr << "[sessions] skipped " << d.path().string() << ": corrupt or truncated session ("
                << ex.what() << ")" << std::endl;
    }
  }
  if (reloaded_ || skipped_) {
    std::cerr << "[sessions] " << options_.dir << ": " << reloaded_ << " session(s) reloaded, "
              << skipped_ << " skipped" << std::endl;
  }
}

void AudioSessions::persist_or_log(const Entry& e) const {
  try {
    persist(e);
  } catch (const std::exception& ex) {
    std::cerr << ex.what() << std::endl;
  }
}

void AudioSessions::persist(const Entry& e) const {
  nlohmann::json c = {{"model", e.config.model},
                      {"temperature", e.config.temperature},
                      {"response_format", e.config.response_format},
                      {"input_format", input_name(e.config.input)},
                      {"sample_rate", e.config.sample_rate},
                      {"filename", e.config.filename},
                      {"commit", commit_name(e.config.commit.value_or(options_.commit))}};
  if (e.config.language) c["language"] = *e.config.language;
  if (e.config.prompt) c["prompt"] = *e.config.prompt;
  nlohmann::json segs = nlohmann::json::array();
  for (const Segment& s : e.committed) segs.push_back(segment_json(s));
  nlohmann::json j = {{"version", 1},
                      {"id", e.id},
                      {"created_at", e.created_at},
                      {"config", c},
                      {"state", e.state == "completed" ? "completed" : "open"},
                      {"committed_samples", e.committed_samples},
                      {"prompt_from", e.prompt_from},
                      {"language", e.language},
                      {"segments", segs}};
  if (e.final) j["duration"] = e.final->duration;
  write_atomically(e.dir / "meta.json",
                   j.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace));
}

std::shared_ptr<AudioSessions::Entry> AudioSessions::find(const std::string& id) {
  const auto it = valid_id(id) ? sessions_.find(id) : sessions_.end();
  check(it != sessions_.end(), ErrorKind::not_found,
        "[sessions] no session '" + id + "' (unknown, deleted or expired)");
  return it->second;
}

SessionStatus AudioSessions::status_of(const Entry& e) const {
  SessionStatus s;
  s.id = e.id;
  s.state = e.state;
  s.config = e.config;
  s.created_at = e.created_at;
  s.bytes_received = e.bytes;
  s.seconds_received = double(e.samples_received) / kRate;
  s.seconds_transcribed = double(e.committed_samples) / kRate;
  if (e.final) {
    s.seconds_received = s.seconds_transcribed = e.final->duration;
    s.text = e.final->result.text;
  } else {
    for (const Segment& seg : e.committed) s.text += seg.text;
  }
  s.language = e.language;
  const double idle = std::chrono::duration<double>(Clock::now() - e.last_active).count();
  s.idle_expires_in_s = std::max(0.0, options_.idle_timeout_s - idle);
  return s;
}

SessionStatus AudioSessions::create(const SessionConfig& config) {
  check_arg(config.input == SessionInput::container ||
                (config.sample_rate >= 1000 && config.sample_rate <= 384000),
            "[sessions] 'sample_rate' must be in [1000, 384000] Hz");
  auto e = std::make_shared<Entry>();
  e->config = config;
  if (!e->config.commit) e->config.commit = options_.commit;
  e->created_at = unix_now();
  std::lock_guard lock(mu_);
  const int open = int(std::count_if(sessions_.begin(), sessions_.end(), [](const auto& kv) {
    return kv.second->state != "completed";
  }));
  check(open < options_.max_sessions, ErrorKind::resource_exhausted,
        "[sessions] " + std::to_string(open) +
            " sessions are open, the server's limit (parley serve --max-sessions); close or "
            "delete one first");
  do {
    e->id = new_session_id();
  } while (sessions_.count(e->id));
  e->dir = fs::path(options_.dir) / e->id;
  fs::create_directories(e->dir);
  {
    std::ofstream touch(e->audio_path(), std::ios::binary);
    check(bool(touch), ErrorKind::internal, "[sessions] cannot create " + e->audio_path().string());
  }
  persist(*e);
  sessions_[e->id] = e;
  return status_of(*e);
}

SessionStatus AudioSessions::append(const std::string& id, std::span<const uint8_t> bytes) {
  check_arg(!bytes.empty(), "[sessions] the chunk is empty: send the audio bytes as the body");
  std::shared_ptr<Entry> e;
  {
    std::lock_guard lock(mu_);
    e = find(id);
    e->last_active = Clock::now();
  }
  std::lock_guard io(e->io_mu);  // appends in order, one at a time
  {
    std::lock_guard lock(mu_);
    check_arg(e->state == "open" && !e->removed, "[sessions] session '" + id + "' is " +
                                                     (e->removed ? "deleted" : e->state) +
                                                     ": no more audio can be appended");
    check(e->bytes + bytes.size() <= options_.max_session_bytes, ErrorKind::resource_exhausted,
          "[sessions] session '" + id + "' would hold " + std::to_string(e->bytes + bytes.size()) +
              " bytes of audio, over the server's limit of " +
              std::to_string(options_.max_session_bytes) + " (parley serve --max-session-mb)");
  }
  const int fd = ::open(e->audio_path().c_str(), O_WRONLY | O_APPEND | O_CLOEXEC);
  check(fd >= 0, ErrorKind::internal, "[sessions] cannot open " + e->audio_path().string());
  size_t done = 0;
  while (done < bytes.size()) {
    const ssize_t n = ::write(fd, bytes.data() + done, bytes.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {
      const std::string why = std::strerror(errno);
      // Cut back to what was acknowledged, so a retry does not duplicate bytes.
      if (::ftruncate(fd, off_t(e->bytes)) != 0) done = 0;
      ::close(fd);
      throw Error(ErrorKind::internal, "[sessions] cannot spool audio: " + why);
    }
    done += size_t(n);
  }
  ::fdatasync(fd);  // acknowledged audio survives a crash
  ::close(fd);
  std::lock_guard lock(mu_);
  e->bytes += bytes.size();
  cv_.notify_all();
  return status_of(*e);
}

SessionStatus AudioSessions::status(const std::string& id) {
  std::lock_guard lock(mu_);
  auto e = find(id);
  e->last_active = Clock::now();
  return status_of(*e);
}

void AudioSessions::close(const std::string& id, SessionDone done) {
  std::shared_ptr<const SessionResult> ready;
  {
    std::lock_guard lock(mu_);
    auto e = find(id);
    e->last_active = Clock::now();
    check(!stopping_, ErrorKind::cancelled, "[sessions] the server is shutting down");
    if (e->final) {
      ready = e->final;
    } else {
      e->waiters.push_back(std::move(done));
      e->state = "closing";
      // A tail pass that has not read every byte is not the transcript's end: stop it, so
      // that the close's own pass starts sooner. One that has is (on_job_done).
      if (e->job_running && e->job_kind == JobKind::tail && e->job && e->job_bytes != e->bytes)
        e->job->cancelled = true;
    }
  }
  if (ready) return done(ready, nullptr);
  cv_.notify_all();
}

void AudioSessions::remove(const std::string& id) {
  std::vector<SessionDone> waiters;
  {
    std::lock_guard lock(mu_);
    auto e = find(id);
    if (e->job) e->job->cancelled = true;
    waiters.swap(e->waiters);
    drop(e);
  }
  const auto err = std::make_exception_ptr(
      Error(ErrorKind::not_found, "[sessions] session '" + id + "' was deleted"));
  for (auto& w : waiters) w(nullptr, err);
}

void AudioSessions::drop(const std::shared_ptr<Entry>& e) {
  e->removed = true;
  sessions_.erase(e->id);
  std::error_code ec;
  fs::remove_all(e->dir, ec);
}

int AudioSessions::expire_idle(Clock::time_point now) {
  std::vector<std::shared_ptr<Entry>> expired;
  {
    std::lock_guard lock(mu_);
    for (auto& [id, e] : sessions_) {
      const double idle = std::chrono::duration<double>(now - e->last_active).count();
      if (idle > options_.idle_timeout_s && e->waiters.empty()) expired.push_back(e);
    }
    for (auto& e : expired) {
      if (e->job) e->job->cancelled = true;
      drop(e);
      std::cerr << "[sessions] " << e->id << " expired after " << options_.idle_timeout_s
                << " s without requests" << std::endl;
    }
  }
  return int(expired.size());
}

void AudioSessions::run_background() {
  while (true) {
    std::vector<std::shared_ptr<Entry>> all;
    {
      std::unique_lock lock(mu_);
      cv_.wait_for(lock, std::chrono::milliseconds(250));
      if (stopping_) return;
      for (auto& [id, e] : sessions_) all.push_back(e);
    }
    expire_idle(Clock::now());
    for (auto& e : all) schedule(e);
  }
}

void AudioSessions::schedule(const std::shared_ptr<Entry>& e) {
  std::unique_lock lock(mu_);
  if (e->removed || e->job_running || e->final || stopping_) return;
  const bool final = e->state == "closing";
  if (!final && e->bytes == e->decoded_bytes) return;  // nothing new since the last look
  if (final && e->agreed() && e->hypothesis_bytes > 0 && e->hypothesis_bytes == e->bytes) {
    // The last tail pass read every byte: its segments are the rest of the transcript.
    std::vector<SessionDone> waiters;
    const auto result = finish(*e, e->hypothesis_samples, waiters);
    lock.unlock();
    for (auto& w : waiters) w(result, nullptr);
    return;
  }
  const uint64_t bytes = e->bytes;
  lock.unlock();

  std::vector<float> samples;
  std::exception_ptr err;
  try {
    const std::vector<uint8_t> data = read_prefix(e->audio_path(), bytes);
    if (e->config.input == SessionInput::container) {
      samples = decode_audio(data, e->config.filename.empty() ? e->id : e->config.filename);
    } else {
      samples =
          decode_audio(wav_file(data, e->config.input, e->config.sample_rate), e->id + ".wav");
    }
  } catch (...) {
    err = std::current_exception();
  }

  lock.lock();
  if (e->removed || e->job_running || e->final || stopping_) return;
  e->decoded_bytes = bytes;
  if (!err) e->samples_received = int64_t(samples.size());
  const int64_t pending = int64_t(samples.size()) - e->committed_samples;
  if (!final) {
    // A container whose header or first frames have not all arrived does not decode yet.
    if (err) return;
    if (pending >= int64_t(options_.capture_step_s * kRate))
      return submit_job(e, std::move(samples), JobKind::windows, bytes);
    if (e->agreed() && pending >= int64_t(options_.agree_min_s * kRate) &&
        int64_t(samples.size()) - e->last_tail_samples >= int64_t(options_.agree_step_s * kRate))
      return submit_job(e, std::move(samples), JobKind::tail, bytes);
    return;
  }
  if (!err && bytes == 0) {
    err = std::make_exception_ptr(Error(
        ErrorKind::invalid_argument, "[sessions] session '" + e->id + "' has no audio to close"));
  }
  if (err) {
    std::vector<SessionDone> waiters;
    waiters.swap(e->waiters);
    e->state = "open";  // nothing lost: more audio may come, or a DELETE
    lock.unlock();
    for (auto& w : waiters) w(nullptr, err);
    return;
  }
  submit_job(e, std::move(samples), JobKind::final, bytes);
}

// mu_ held (through `lock` in schedule); unlocks around submit.
void AudioSessions::submit_job(const std::shared_ptr<Entry>& e, std::vector<float> samples,
                               JobKind kind, uint64_t bytes) {
  const int64_t start = e->committed_samples;
  const int64_t n = std::max<int64_t>(0, int64_t(samples.size()) - start);
  auto job = std::make_shared<TranscriptionJob>();
  job->audio = samples_wav(std::span<const float>(samples).subspan(size_t(start), size_t(n)));
  job->filename = e->id + ".wav";
  job->vad = false;  // as `parley transcribe`: Whisper's own silence test only
  TranscribeOptions& o = job->options;
  o.complete_windows_only = kind == JobKind::windows;
  // Agreed sessions: the tail and the close are less than a window of speech, encoded over
  // the context it needs; whole windows keep the full one.
  o.fit_audio_ctx = e->agreed() && kind != JobKind::windows;
  if (kind == JobKind::tail) e->last_tail_samples = int64_t(samples.size());
  o.language = !e->language.empty() ? std::optional(e->language) : e->config.language;
  if (e->config.temperature > 0) o.temperatures = {e->config.temperature};
  // The seek loop's own prompt: every committed window's tokens (timestamps included) since
  // the last reset; the loop keeps the last 223 of them. With the session's `prompt` still
  // in it (no reset yet), the prompt is that text and the committed text, encoded again
  // (no tokenizer here to encode the prompt alone): close to the loop's, not equal.
  if (e->prompt_from == 0 && e->config.prompt) {
    std::string prompt = *e->config.prompt;
    for (const Segment& seg : e->committed) prompt += seg.text;
    if (prompt.size() > kPromptChars) {
      size_t cut = prompt.size() - kPromptChars;
      while (cut < prompt.size() && (uint8_t(prompt[cut]) & 0xC0) == 0x80) ++cut;
      prompt.erase(0, cut);
    }
    o.initial_prompt = prompt;
  } else {
    for (size_t i = e->prompt_from; i < e->committed.size(); ++i) {
      const auto& t = e->committed[i].tokens;
      o.prompt_tokens.insert(o.prompt_tokens.end(), t.begin(), t.end());
    }
    if (o.prompt_tokens.size() > kPromptTokens)
      o.prompt_tokens.erase(o.prompt_tokens.begin(),
                            o.prompt_tokens.end() - int64_t(kPromptTokens));
  }

  if (n == 0) {  // everything was committed during capture: the final result is ready
    TranscribeResult empty;
    empty.language = e->language;
    e->job_running = true;
    ++jobs_in_flight_;
    mu_.unlock();
    on_job_done(e, start, 0, kind, bytes, &empty, nullptr);
    mu_.lock();
    return;
  }
  job->on_done = [this, e, start, n, kind, bytes](const TranscribeResult* r, double,
                                                  std::exception_ptr ep) {
    on_job_done(e, start, n, kind, bytes, r, ep);
  };
  e->job = job;
  e->job_running = true;
  e->job_kind = kind;
  e->job_bytes = bytes;
  ++jobs_in_flight_;
  mu_.unlock();
  const bool queued = service_.submit(job);
  mu_.lock();
  if (!queued) {  // the queue is full: the background thread tries again
    e->job.reset();
    e->job_running = false;
    --jobs_in_flight_;
    e->decoded_bytes = 0;
    if (kind == JobKind::tail) e->last_tail_samples = 0;
    cv_.notify_all();
  }
}

std::shared_ptr<const SessionResult> AudioSessions::finish(Entry& e, int64_t duration_samples,
                                                           std::vector<SessionDone>& waiters) {
  auto res = std::make_shared<SessionResult>();
  for (Segment& s : e.hypothesis) e.committed.push_back(std::move(s));
  e.hypothesis.clear();
  res->config = e.config;
  res->duration = double(duration_samples) / kRate;
  res->result.language = e.language;
  res->result.segments = e.committed;
  for (size_t i = 0; i < res->result.segments.size(); ++i) {
    res->result.segments[i].id = int(i);
    res->result.text += res->result.segments[i].text;
  }
  e.committed_samples = duration_samples;
  e.final = res;
  e.state = "completed";
  waiters.swap(e.waiters);
  std::error_code ec;
  fs::remove(e.audio_path(), ec);  // the transcript is all that is kept
  persist_or_log(e);
  return res;
}

void AudioSessions::on_job_done(const std::shared_ptr<Entry>& e, int64_t start, int64_t n,
                                JobKind kind, uint64_t bytes, const TranscribeResult* r,
                                std::exception_ptr ep) {
  std::vector<SessionDone> waiters;
  std::shared_ptr<const SessionResult> result;
  const bool final = kind == JobKind::final;
  {
    std::lock_guard lock(mu_);
    --jobs_in_flight_;
    e->job_running = false;
    e->job.reset();
    cv_.notify_all();
    if (e->removed) return;
    if (ep) {
      if (final) {
        waiters.swap(e->waiters);
        e->state = "open";
      } else {
        try {
          std::rethrow_exception(ep);
        } catch (const std::exception& ex) {
          const auto* err = dynamic_cast<const Error*>(&ex);
          if (!err ||
              err->kind() != ErrorKind::cancelled)  // cancelled: a close stopped a tail pass
            std::cerr << "[sessions] " << e->id
                      << ": transcription during capture failed: " << ex.what() << std::endl;
        }
      }
    } else {
      if (e->language.empty()) e->language = r->language;
      const int64_t offset_frames = start / kHop;
      const double offset_s = double(start) / kRate;
      const auto shifted = [&](Segment s) {
        s.seek += int(offset_frames);
        s.start += offset_s;
        s.end += offset_s;
        for (Word& w : s.words) {
          w.start += offset_s;
          w.end += offset_s;
        }
        return s;
      };
      const auto commit = [&](const Segment& s0) {
        e->committed.push_back(shifted(s0));
        // The seek loop drops the prompt after a window decoded above temperature 0.5.
        if (e->committed.back().temperature > 0.5f) e->prompt_from = e->committed.size();
      };
      if (kind == JobKind::tail) {
        // Commit the segments this pass and the last agree on (by their words, case and
        // punctuation aside), up to one that is this pass's last or ends too near the end
        // of the audio; the rest waits for the next pass. The seek moves to the end of the
        // last one committed: a timestamp the model put between two segments, where the
        // offline loop cuts its windows too.
        const auto& cur = r->segments;
        const double end_s = double(n) / kRate - options_.agree_guard_s;
        size_t k = 0;
        while (k + 1 < cur.size() && k < e->hypothesis.size() && cur[k].end <= end_s &&
               agreement_text(cur[k].text) == agreement_text(e->hypothesis[k].text))
          ++k;
        const int64_t seek_frames = k > 0 ? std::lround(double(cur[k - 1].end) * 100.0) : 0;
        if (seek_frames <= 0 || seek_frames * kHop > n) k = 0;  // never backwards or past
        for (size_t i = 0; i < k; ++i) commit(cur[i]);
        if (k > 0) e->committed_samples = start + seek_frames * kHop;
        e->hypothesis.clear();
        for (size_t i = k; i < cur.size(); ++i) e->hypothesis.push_back(shifted(cur[i]));
        e->hypothesis_bytes = bytes;
        e->hypothesis_samples = start + n;
        if (e->state == "closing" && bytes == e->bytes) {
          result = finish(*e, start + n, waiters);  // the pass covered every byte
        } else if (k > 0) {
          persist_or_log(*e);
        }
      } else {
        // A capture job decoded whole windows only: all of them are committed.
        const int64_t commit_frames = final ? n / kHop + 1 : r->next_seek;
        for (const Segment& s0 : r->segments)
          if (s0.seek < commit_frames) commit(s0);
        e->hypothesis.clear();  // a later seek: the next tail pass starts afresh
        e->hypothesis_bytes = 0;
        if (final) {
          result = finish(*e, start + n, waiters);
        } else {
          if (commit_frames > 0) e->committed_samples = start + commit_frames * kHop;
          persist_or_log(*e);
        }
      }
    }
    if (!final && !result && stopping_ && !e->waiters.empty()) {  // no background thread
      waiters.swap(e->waiters);
      e->state = "open";
      ep = std::make_exception_ptr(Error(ErrorKind::cancelled, kShuttingDown));
    }
  }
  for (auto& w : waiters) w(result, result ? nullptr : ep);
}

}  // namespace parley

// `parley dictate`: speak, get text. Audio from the microphone (PortAudio) or a file
// streamed at real-time speed (--input FILE, --speed X), gated by push-to-talk (hold the
// talk key in the terminal, or --press to start/stop; `parley dictate --toggle` from
// another process, e.g. a desktop shortcut, through the control socket), trimmed to its
// speech by Silero VAD, transcribed by a Whisper model loaded once and kept warm (or by a
// running server, --server URL), and written to stdout, the clipboard or typed into the
// focused window (--output).
#include <poll.h>
#include <termios.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <csignal>
#include <cstdlib>
#include <filesystem>
#include <iostream>
#include <memory>
#include <optional>

#include "cli/commands.h"
#include "cli/default_model.h"
#include "cli/load_options.h"
#include "cli/vad_gate.h"
#include "dictate/capture.h"
#include "dictate/control_socket.h"
#include "dictate/output.h"
#include "dictate/push_to_talk.h"
#include "dictate/remote.h"
#include "dictate/trim.h"
#include "engine/error.h"
#include "engine/threadpool.h"
#include "whisper/model.h"
#include "whisper/transcribe.h"

namespace parley::cli {
namespace {

using namespace parley::dictate;
using Clock = std::chrono::steady_clock;

struct DictateCliOptions {
  std::string input;   // empty: the microphone
  double speed = 1.0;  // --input: times real time
  std::string model;   // empty: the default tiny.en
  std::string server;  // empty: transcribe locally
  std::string api_key;
  std::string output = "stdout";
  bool toggle = false;       // send a toggle to the running dictate and exit
  bool press = false;        // press to start, press to stop (instead of holding)
  std::string key = " ";     // the talk key
  std::string socket;        // empty: default_control_socket_path()
  std::string vad = "on";    // trim each utterance to its speech
  std::string vad_model;     // empty: default_vad_model_path()
  std::string language;      // empty: the model's (en for .en models)
  double pre_roll_ms = 300;  // audio kept from before the key press
  double max_seconds = 120;  // an utterance is cut (and transcribed) at this length
  int threads = 0;
  int audio_ctx = 0;
  DeviceFlags device;
};

std::atomic<bool> g_stop{false};
void on_signal(int) { g_stop = true; }

// The terminal in raw mode (no line buffering, no echo; Ctrl-C still interrupts) while
// this lives; stdin reads never block.
class RawTerminal {
 public:
  RawTerminal() {
    if (::tcgetattr(0, &saved_) != 0) return;
    termios raw = saved_;
    raw.c_lflag &= ~tcflag_t(ICANON | ECHO);
    raw.c_cc[VMIN] = 0;
    raw.c_cc[VTIME] = 0;
    active_ = ::tcsetattr(0, TCSANOW, &raw) == 0;
  }
  ~RawTerminal() {
    if (active_) ::tcsetattr(0, TCSANOW, &saved_);
  }
  RawTerminal(const RawTerminal&) = delete;
  RawTerminal& operator=(const RawTerminal&) = delete;

 private:
  termios saved_{};
  bool active_ = false;
};

// Whisper, local (loaded once, kept warm) or a server.
class Transcriber {
 public:
  explicit Transcriber(const DictateCliOptions& o) {
    if (!o.server.empty()) {
      remote_.url = o.server;
      remote_.api_key = o.api_key;
      remote_.language = o.language;
      transcription_endpoint(o.server);  // a malformed URL fails now, not at the first word
      return;
    }
    model_ = WhisperModel::load(o.model.empty() ? default_model_dir() : o.model,
                                load_options(o.device, o.audio_ctx));
    tokenizer_.emplace(load_tokenizer(*model_));
    session_ = std::make_unique<WhisperSession>(model_);
    if (!o.language.empty()) options_.language = o.language;
  }

  std::string operator()(std::span<const float> samples) {
    std::string text = session_ ? transcribe(*session_, *tokenizer_, samples, options_).text
                                : transcribe_remote(remote_, samples);
    const size_t b = text.find_first_not_of(" \t\n");
    const size_t e = text.find_last_not_of(" \t\n");
    return b == std::string::npos ? std::string() : text.substr(b, e - b + 1);
  }

 private:
  RemoteOptions remote_;
  std::shared_ptr<const WhisperModel> model_;
  std::optional<WhisperTokenizer> tokenizer_;
  std::unique_ptr<WhisperSession> session_;
  TranscribeOptions options_;
};

std::unique_ptr<VadGate> make_vad(const DictateCliOptions& o) {
  if (o.vad == "off") return nullptr;
  VadGateOptions v;
  v.enabled = true;
  v.model = o.vad_model;
  if (o.vad_model.empty() && !std::filesystem::exists(default_vad_model_path())) {
    std::cerr << "[dictate] no Silero VAD model at " << default_vad_model_path()
              << ": utterances are not trimmed (--vad-model FILE, or --vad off)" << std::endl;
    return nullptr;
  }
  return std::make_unique<VadGate>(v);
}

void run_dictate(const DictateCliOptions& opt) {
  const std::string socket_path = opt.socket.empty() ? default_control_socket_path() : opt.socket;
  if (opt.toggle) {
    std::cout << send_control(socket_path, "toggle") << std::endl;
    return;
  }
  if (opt.threads > 0) set_cpu_threads(opt.threads);
  check_arg(opt.key.size() == 1, "[dictate] --key must be one character, got '" + opt.key + "'");
  check_arg(opt.pre_roll_ms >= 0 && opt.max_seconds > 0,
            "[dictate] --pre-roll-ms must be >= 0 and --max-seconds positive");
  // Everything that can fail at start-up does, before anyone talks.
  const char* path_env = std::getenv("PATH");
  const char* wayland = std::getenv("WAYLAND_DISPLAY");
  const OutputCommand sink =
      output_command(parse_output_kind(opt.output), path_env ? path_env : "", wayland && *wayland);
  const std::unique_ptr<CaptureSource> source =
      opt.input.empty() ? open_microphone() : open_file_source(opt.input, opt.speed);
  const std::unique_ptr<VadGate> vad = make_vad(opt);
  Transcriber transcriber(opt);
  ControlServer control(socket_path);

  std::signal(SIGINT, on_signal);
  std::signal(SIGTERM, on_signal);
  const bool from_file = !opt.input.empty();
  const bool keys = !from_file && ::isatty(0);
  std::optional<RawTerminal> raw;
  if (keys) raw.emplace();
  const std::string key_name = opt.key == " " ? "SPACE" : "'" + opt.key + "'";
  if (!from_file) {
    std::cerr << "[dictate] " << source->name() << "; "
              << (keys ? (opt.press ? "press " + key_name + " to start and stop"
                                    : "hold " + key_name + " to talk") +
                             ", q quits; "
                       : std::string())
              << "`parley dictate --toggle` starts and stops (" << socket_path << ")" << std::endl;
  }

  PushToTalkOptions ptt_options;
  ptt_options.mode = opt.press ? TalkMode::press : TalkMode::hold;
  ptt_options.key = opt.key[0];
  PushToTalk ptt(ptt_options);
  const auto t0 = Clock::now();
  const auto seconds = [&] { return std::chrono::duration<double>(Clock::now() - t0).count(); };
  if (from_file) ptt.toggle(0);  // a file is one utterance, start to end

  const size_t pre_roll = size_t(opt.pre_roll_ms * kSampleRate / 1000);
  const size_t max_samples = size_t(opt.max_seconds * kSampleRate);
  std::vector<float> chunk, utterance, recent;  // recent: the pre-roll ring (not talking)
  bool was_talking = false;

  const auto finish = [&] {
    std::span<const float> audio(utterance);
    if (vad) {
      const auto [b, e] = speech_span(vad->speech(audio), audio.size(), kSampleRate / 5);
      audio = audio.subspan(b, e - b);
    }
    if (audio.empty()) {
      std::cerr << "[dictate] (no speech)" << std::endl;
    } else if (const std::string text = transcriber(audio); !text.empty()) {
      deliver(sink, text);
    }
    utterance.clear();
  };

  while (!g_stop) {
    chunk.clear();
    const bool more = source->read(chunk);
    const double now = seconds();
    if (keys) {
      char c;
      while (::read(0, &c, 1) == 1) {
        if (!ptt.key(c, now) && (c == 'q' || c == 4)) g_stop = true;  // q, Ctrl-D
      }
    }
    control.poll([&](const std::string& command) -> std::string {
      if (command == "toggle")
        ptt.toggle(now);
      else if (command != "status")
        return "error: unknown command '" + command + "'";
      return ptt.talking() ? "recording" : "stopped";
    });
    ptt.tick(now);
    if (from_file && !more) break;
    if (ptt.talking() && !was_talking) {
      utterance.assign(recent.begin(), recent.end());
      if (!from_file) std::cerr << "[dictate] recording..." << std::endl;
    }
    if (ptt.talking()) {
      utterance.insert(utterance.end(), chunk.begin(), chunk.end());
      if (utterance.size() >= max_samples) {
        std::cerr << "[dictate] " << opt.max_seconds << " s reached: transcribing" << std::endl;
        finish();
      }
    } else {
      recent.insert(recent.end(), chunk.begin(), chunk.end());
      if (recent.size() > pre_roll) recent.erase(recent.begin(), recent.end() - long(pre_roll));
      if (was_talking) finish();
    }
    was_talking = ptt.talking();
    if (!more) break;
  }
  if (was_talking && !utterance.empty()) finish();  // end of file, or stopped while talking
}

}  // namespace

void add_dictate_command(CLI::App& app) {
  auto opt = std::make_shared<DictateCliOptions>();
  CLI::App* cmd = app.add_subcommand(
      "dictate",
      "Speak, get text: push-to-talk from the microphone (or --input FILE), Silero VAD "
      "trimming, Whisper kept warm (or --server URL), text to stdout, the clipboard or typed");
  cmd->add_option("--input", opt->input,
                  "Stream this audio file at real-time speed instead of the microphone");
  cmd->add_option("--speed", opt->speed, "--input: times real time (e.g. 20 in tests)")
      ->capture_default_str();
  cmd->add_option("-m,--model", opt->model, "Whisper model (default: the built-in tiny.en)");
  cmd->add_option("--server", opt->server,
                  "Transcribe with a running parley (or OpenAI-compatible) server at "
                  "http://HOST:PORT instead of a local model");
  cmd->add_option("--api-key", opt->api_key, "--server: Bearer key")->envname("OPENAI_API_KEY");
  cmd->add_option("-o,--output", opt->output,
                  "stdout, clipboard (wl-copy / xclip) or type (wtype / ydotool / xdotool)")
      ->check(CLI::IsMember({"stdout", "clipboard", "type"}))
      ->capture_default_str();
  cmd->add_flag("--toggle", opt->toggle,
                "Start or stop the running `parley dictate` (bind this to a desktop shortcut)");
  cmd->add_flag("--press", opt->press, "Press the key to start and again to stop (no holding)");
  cmd->add_option("--key", opt->key, "The talk key (default: space)");
  cmd->add_option("--socket", opt->socket,
                  "Control socket (default: $XDG_RUNTIME_DIR/parley-dictate.sock)");
  cmd->add_option("--vad", opt->vad, "Trim each utterance to its speech with Silero VAD")
      ->check(CLI::IsMember({"on", "off"}))
      ->capture_default_str();
  cmd->add_option("--vad-model", opt->vad_model, "Silero VAD model (default: the installed one)");
  cmd->add_option("-l,--language", opt->language, "Language code (default: the model's)");
  cmd->add_option("--pre-roll-ms", opt->pre_roll_ms, "Audio kept from before the key press, ms")
      ->capture_default_str();
  cmd->add_option("--max-seconds", opt->max_seconds, "Longest utterance, s")->capture_default_str();
  cmd->add_option("--threads", opt->threads, "CPU threads (default: all)");
  add_device_flags(cmd, opt->device);
  add_whisper_load_flags(cmd, opt->device, opt->audio_ctx);
  cmd->callback([opt] { run_dictate(*opt); });
}

}  // namespace parley::cli

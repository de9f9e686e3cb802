// ChromeTrace: a per-iteration trace in the Chrome trace event format (`--trace FILE`; open
// it in chrome://tracing or ui.perfetto.dev). Complete events ("ph": "X") with microsecond
// timestamps from the trace's start, written as a JSON array; the file is valid JSON once
// the trace is closed, and the viewers also read a file cut short (a server killed).
#pragma once

#include <chrono>
#include <fstream>
#include <string>
#include <string_view>

#include <nlohmann/json.hpp>

namespace parley {

class ChromeTrace {
 public:
  using Clock = std::chrono::steady_clock;
  // Throws Error(not_found) when the file cannot be created.
  explicit ChromeTrace(const std::string& path);
  ~ChromeTrace();  // closes the array
  ChromeTrace(const ChromeTrace&) = delete;
  ChromeTrace& operator=(const ChromeTrace&) = delete;

  // One span on thread row `tid` (0: the engine's iteration; 1: its stages).
  void span(std::string_view name, Clock::time_point start, Clock::time_point end, int tid,
            const nlohmann::json& args = nlohmann::json::object());
  void flush() { out_.flush(); }

 private:
  std::ofstream out_;
  Clock::time_point origin_;
  bool first_ = true;
};

}  // namespace parley

// Helpers shared by the chat-model tests: a per-test temporary folder and synthetic tiny
// models written into it.
#pragma once

#include <unistd.h>

#include <filesystem>
#include <string>

#include "llm/synth.h"

namespace parley::test {

// A fresh folder under the system temp dir, removed when the object goes.
class TempDir {
 public:
  explicit TempDir(const std::string& tag) {
    path_ = std::filesystem::temp_directory_path() /
            ("parley_llm_" + tag + "_" + std::to_string(::getpid()));
    std::filesystem::remove_all(path_);
    std::filesystem::create_directories(path_);
  }
  ~TempDir() { std::filesystem::remove_all(path_); }
  std::string str() const { return path_.string(); }
  std::filesystem::path path() const { return path_; }

 private:
  std::filesystem::path path_;
};

inline std::string write_tiny(const TempDir& dir, const std::string& shape, uint64_t seed = 0) {
  LlmSynthOptions o;
  o.shape = shape;
  o.seed = seed;
  const std::string out = (dir.path() / shape).string();
  write_synth_llm(o, out);
  return out;
}

}  // namespace parley::test

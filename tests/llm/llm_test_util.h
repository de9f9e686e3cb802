// Helpers shared by the chat-model tests: a per-test temporary folder, synthetic tiny
// models written into it, and seeded token ids.
#pragma once

#include <unistd.h>

#include <cstdint>
#include <filesystem>
#include <string>
#include <vector>

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

// n seeded pseudo-random token ids in [3, vocab) (ids 1 and 2 are the tiny shapes' BOS/EOS).
inline std::vector<int32_t> tokens(int64_t n, int32_t seed, int64_t vocab) {
  std::vector<int32_t> t(static_cast<size_t>(n));
  uint32_t s = uint32_t(seed) * 2654435761u + 1;
  for (auto& x : t) x = int32_t(3 + (s = s * 1664525u + 1013904223u) % uint32_t(vocab - 3));
  return t;
}

inline std::string write_tiny(const TempDir& dir, const std::string& shape, uint64_t seed = 0) {
  LlmSynthOptions o;
  o.shape = shape;
  o.seed = seed;
  const std::string out = (dir.path() / shape).string();
  write_synth_llm(o, out);
  return out;
}

}  // namespace parley::test

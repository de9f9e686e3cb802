// `parley transcribe a b c` (batched by default) prints and writes exactly what
// `--batch-size 1` (one file at a time) does, and `parley bench batch` prints its JSON line.
#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>

#include <nlohmann/json.hpp>

#include "cli/run_parley.h"

namespace {

namespace fs = std::filesystem;
using parley_test::default_tiny_en_dir;
using parley_test::run_parley;

const std::string kAudio = std::string(PARLEY_TEST_DATA) + "/audio/";

bool default_model_present() {
  return !std::getenv("PARLEY_HOME") && !std::getenv("XDG_DATA_HOME") &&
         fs::exists(default_tiny_en_dir() + "/model.bin");
}

std::string read_file(const fs::path& p) {
  std::ifstream f(p, std::ios::binary);
  std::stringstream ss;
  ss << f.rdbuf();
  return ss.str();
}

TEST(BatchCli, SeveralFilesGiveWhatOneAtATimeGives) {
  if (!default_model_present()) GTEST_SKIP() << "default model not at " << default_tiny_en_dir();
  const std::string files =
      "'" + kAudio + "jfk.wav' '" + kAudio + "english.wav' '" + kAudio + "hotwords.mp3'";
  const fs::path batched = fs::path(testing::TempDir()) / "parley_batch_cli_batched";
  const fs::path single = fs::path(testing::TempDir()) / "parley_batch_cli_single";
  fs::remove_all(batched);
  fs::remove_all(single);
  const auto a =
      run_parley("transcribe " + files + " -f srt -o '" + batched.string() + "' --batch-size 3");
  const auto b =
      run_parley("transcribe " + files + " -f srt -o '" + single.string() + "' --batch-size 1");
  ASSERT_EQ(a.exit_code, 0) << a.output;
  ASSERT_EQ(b.exit_code, 0) << b.output;
  EXPECT_EQ(a.output, b.output);
  EXPECT_NE(a.output.find("== " + kAudio + "english.wav"), std::string::npos) << a.output;
  EXPECT_NE(a.output.find("ask not what your country"), std::string::npos) << a.output;
  for (const char* name : {"jfk.srt", "english.srt", "hotwords.srt"}) {
    ASSERT_TRUE(fs::exists(batched / name)) << name;
    EXPECT_FALSE(read_file(batched / name).empty()) << name;
    EXPECT_EQ(read_file(batched / name), read_file(single / name)) << name;
  }
}

TEST(BatchCli, BenchBatchForcedModePrintsItsFigures) {
  if (!default_model_present()) GTEST_SKIP() << "default model not at " << default_tiny_en_dir();
  const auto r = run_parley("bench batch '" + kAudio + "english.wav' '" + kAudio +
                                "jfk.wav' --synthetic-files 3 --seconds 12 --batch-size 2 "
                                "--forced-tokens 5",
                            true);
  ASSERT_EQ(r.exit_code, 0) << r.output << r.err;
  const auto j = nlohmann::json::parse(r.output);
  EXPECT_EQ(j["bench"], "whisper_batch");
  EXPECT_EQ(j["mode"], "forced");
  EXPECT_EQ(j["files"], 3);
  EXPECT_DOUBLE_EQ(j["audio_seconds"].get<double>(), 36.0);
  EXPECT_EQ(j["windows"], 3);  // one 30 s window per 12 s file
  EXPECT_EQ(j["tokens"], 15);
  EXPECT_EQ(j["steps"], 4 * 2);  // two batches (2 + 1 windows), 4 steps after the prefill
  EXPECT_EQ(j["batch_size"], 2);
  EXPECT_GT(j["x_real_time"].get<double>(), 0.0);
  EXPECT_GT(j["encoder_ms"].get<double>(), 0.0);
}

TEST(BatchCli, BadBatchSizeIsRefused) {
  const auto r = run_parley("transcribe '" + kAudio + "jfk.wav' --batch-size 0");
  EXPECT_NE(r.exit_code, 0) << r.output;
}

}  // namespace

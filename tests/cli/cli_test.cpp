// Runs the built `parley` binary as a user would and checks what it prints and returns.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <array>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>

#include <nlohmann/json.hpp>

#include "cli/run_parley.h"

namespace {

using parley_test::run_parley;

TEST(Cli, VersionPrintsProjectVersion) {
  auto r = run_parley("--version");
  EXPECT_EQ(r.exit_code, 0);
  EXPECT_THAT(r.output, testing::HasSubstr(std::string("parley ") + PARLEY_VERSION));
}

TEST(Cli, HelpListsSubcommands) {
  auto r = run_parley("--help");
  EXPECT_EQ(r.exit_code, 0);
  EXPECT_THAT(r.output, testing::HasSubstr("bench"));
  EXPECT_THAT(r.output, testing::HasSubstr("inspect"));
}

TEST(Cli, UnknownSubcommandFails) {
  auto r = run_parley("frobnicate");
  EXPECT_NE(r.exit_code, 0);
}

TEST(Cli, BenchOpsPrintsJsonLinesWithPeakFraction) {
  auto r = run_parley("bench ops --device cpu --quick --min-seconds 0.01 --threads 2");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  std::istringstream lines(r.output);
  std::string line;
  int gemm = 0, attention = 0, peak = 0;
  while (std::getline(lines, line)) {
    auto j = nlohmann::json::parse(line);  // every line is one JSON object
    EXPECT_EQ(j.at("device"), "cpu");
    EXPECT_GT(j.at("ms").get<double>(), 0.0);
    EXPECT_GT(j.at("tflops").get<double>(), 0.0);
    const auto kind = j.at("bench").get<std::string>();
    if (kind == "gemm_peak") ++peak;
    if (kind == "gemm" || kind == "attention") {
      kind == "gemm" ? ++gemm : ++attention;
      EXPECT_GT(j.at("fraction_of_peak").get<double>(), 0.0);
    }
  }
  EXPECT_GE(peak, 2);  // f32 and bf16
  EXPECT_GE(gemm, 4);
  EXPECT_GE(attention, 4);
}

TEST(Cli, BenchOpsOnMissingCudaIsAClearError) {
  auto r = run_parley("bench ops --device cuda --quick");
#ifdef PARLEY_HAS_CUDA
  GTEST_SKIP() << "CUDA build";
#endif
  EXPECT_EQ(r.exit_code, 4) << r.output;  // unsupported
  EXPECT_THAT(r.output, testing::HasSubstr("CUDA"));
}

TEST(Cli, ServeOnMissingCudaIsAClearError) {
#ifdef PARLEY_HAS_CUDA
  GTEST_SKIP() << "CUDA build: with a GPU the server would start";
#endif
  // The model loads at start-up, so the error comes before the server listens. (The CUDA
  // server batches like the CPU one since 79db66a: no one-worker clamp to report.)
  auto r = run_parley("serve --device cuda --dtype f16 --port 0 --whisper-batch 3 --vad off");
  EXPECT_NE(r.exit_code, 0) << r.output;
  EXPECT_THAT(r.output, testing::HasSubstr("CUDA requested but not available"));
}

}  // namespace

namespace {

TEST(Cli, InspectReadsTheGgmlTestModel) {
  const std::string file = std::string(PARLEY_TEST_DATA) + "/whisper/for-tests-ggml-tiny.en.bin";
  auto r = run_parley("inspect --json " + file);
  ASSERT_EQ(r.exit_code, 0) << r.output;
  auto j = nlohmann::json::parse(r.output);
  EXPECT_EQ(j.at("format"), "ggml (whisper.cpp)");
  EXPECT_EQ(j.at("metadata").at("n_vocab"), "51864");
  EXPECT_EQ(j.at("metadata").at("mel_filters"), "[80, 201]");
}

TEST(Cli, InspectReadsTheSileroOnnxWeights) {
  auto r = run_parley("inspect " + std::string(PARLEY_TEST_DATA) + "/vad/silero_vad_v6.2.onnx");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_THAT(r.output, testing::HasSubstr("format: onnx"));
  EXPECT_THAT(r.output, testing::HasSubstr("reparam_conv.weight"));
}

TEST(Cli, InspectOfAMissingPathIsNotFound) {
  auto r = run_parley("inspect /nonexistent/model");
  EXPECT_EQ(r.exit_code, 3) << r.output;
  EXPECT_THAT(r.output, testing::HasSubstr("/nonexistent/model does not exist"));
}

TEST(Cli, InspectOfATruncatedFileIsAnInvalidArgumentNamingTheFile) {
  const std::string src = std::string(PARLEY_TEST_DATA) + "/whisper/for-tests-ggml-tiny.bin";
  const std::string dst = testing::TempDir() + "/truncated-ggml.bin";
  std::ifstream in(src, std::ios::binary);
  std::string bytes(3000, '\0');
  in.read(bytes.data(), std::streamsize(bytes.size()));
  std::ofstream(dst, std::ios::binary).write(bytes.data(), std::streamsize(bytes.size()));
  auto r = run_parley("inspect " + dst);
  EXPECT_EQ(r.exit_code, 2) << r.output;
  EXPECT_THAT(r.output, testing::HasSubstr("truncated-ggml.bin"));
}

}  // namespace

namespace {

TEST(Cli, InspectWithoutPathReadsTheDefaultTinyEn) {
  const std::string dir = parley_test::default_tiny_en_dir();
  if (std::getenv("PARLEY_HOME") || !std::filesystem::exists(dir + "/model.bin"))
    GTEST_SKIP() << "default model not at " << dir << " (scripts/setup.sh installs it)";
  auto r = run_parley("inspect --json");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  auto j = nlohmann::json::parse(r.output);
  EXPECT_EQ(j.at("format"), "ctranslate2");
  EXPECT_EQ(j.at("metadata").at("spec"), "WhisperSpec");
  bool found_conv = false;
  for (const auto& t : j.at("tensors"))
    if (t.at("name") == "encoder/conv1/weight") {
      found_conv = true;
      EXPECT_EQ(t.at("shape"), nlohmann::json({384, 80, 3}));
    }
  EXPECT_TRUE(found_conv);
  // tiny.en has about 39 M parameters.
  EXPECT_GT(j.at("parameters").get<int64_t>(), 35'000'000);
  EXPECT_LT(j.at("parameters").get<int64_t>(), 45'000'000);
}

}  // namespace

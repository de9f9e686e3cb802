// `parley transcribe`, `parley whisper dump` and `parley bench whisper` run as a user would,
// on the real tiny.en (skipped when scripts/setup.sh has not installed it): transcript
// text, every output format's structure, -o files, error exits, .npy shapes, bench fields.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <regex>
#include <sstream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "cli/run_parley.h"

namespace {

namespace fs = std::filesystem;
using parley_test::default_tiny_en_dir;
using parley_test::run_parley;
using testing::HasSubstr;

const std::string kJfk = std::string(PARLEY_TEST_DATA) + "/audio/jfk.wav";
constexpr const char* kJfkPhrase = "ask not what your country can do for you";

bool default_model_present() {
  return !std::getenv("PARLEY_HOME") && !std::getenv("XDG_DATA_HOME") &&
         fs::exists(default_tiny_en_dir() + "/model.bin");
}

#define SKIP_WITHOUT_MODEL()                                       \
  if (!default_model_present())                                    \
  GTEST_SKIP() << "default model not at " << default_tiny_en_dir() \
               << " (scripts/setup.sh installs it)"

std::string read_file(const fs::path& p) {
  std::ifstream f(p, std::ios::binary);
  std::stringstream ss;
  ss << f.rdbuf();
  return ss.str();
}

// A fresh empty folder under the test temp dir.
fs::path temp_dir(const std::string& name) {
  const fs::path dir = fs::path(testing::TempDir()) / ("parley_whisper_cli_" + name);
  fs::remove_all(dir);
  fs::create_directories(dir);
  return dir;
}

std::vector<std::string> lines_of(const std::string& text) {
  std::vector<std::string> out;
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);) out.push_back(line);
  return out;
}

// The shape in a .npy v1/v2 header ("'shape': (80, 3000), "), after checking the magic.
std::vector<int64_t> npy_shape(const fs::path& path) {
  const std::string bytes = read_file(path);
  if (bytes.size() < 10 || bytes.compare(0, 6, "\x93NUMPY") != 0) {
    ADD_FAILURE() << path << " is not a .npy file";
    return {};
  }
  const std::string header = bytes.substr(0, 256);
  EXPECT_THAT(header, HasSubstr("'descr': '<f4'"));
  std::smatch m;
  if (!std::regex_search(header, m, std::regex(R"('shape': \(([0-9, ]*)\))"))) {
    ADD_FAILURE() << "no shape in " << header;
    return {};
  }
  std::vector<int64_t> shape;
  std::istringstream dims(m[1].str());  // "80, 3000" (or "80," for 1-D)
  for (std::string dim; std::getline(dims, dim, ',');)
    if (dim.find_first_not_of(' ') != std::string::npos) shape.push_back(std::stoll(dim));
  return shape;
}

TEST(WhisperCli, EveryFormatOnStdoutHasItsStructure) {
  SKIP_WITHOUT_MODEL();
  // Segments go to stderr while a document goes to stdout: stdout is the document alone.
  {
    auto r = run_parley("transcribe --threads 2 -f json " + kJfk, true);
    ASSERT_EQ(r.exit_code, 0) << r.err;
    const auto j = nlohmann::json::parse(r.output);
    EXPECT_THAT(j.at("text").get<std::string>(), HasSubstr(kJfkPhrase));
  }
  {
    auto r = run_parley("transcribe --threads 2 -f verbose_json " + kJfk, true);
    ASSERT_EQ(r.exit_code, 0) << r.err;
    const auto j = nlohmann::json::parse(r.output);
    EXPECT_THAT(j.at("text").get<std::string>(), HasSubstr(kJfkPhrase));
    ASSERT_FALSE(j.at("segments").empty());
    for (const auto& s : j.at("segments")) {
      EXPECT_FALSE(s.at("tokens").empty());
      EXPECT_LT(s.at("start").get<double>(), s.at("end").get<double>());
    }
  }
  {
    auto r = run_parley("transcribe --threads 2 -f srt " + kJfk, true);
    ASSERT_EQ(r.exit_code, 0) << r.err;
    const auto lines = lines_of(r.output);
    ASSERT_GE(lines.size(), 3u) << r.output;
    EXPECT_EQ(lines[0], "1");
    EXPECT_TRUE(std::regex_match(lines[1],
                                 std::regex(R"(\d\d:\d\d:\d\d,\d\d\d --> \d\d:\d\d:\d\d,\d\d\d)")))
        << lines[1];
    EXPECT_THAT(r.output, HasSubstr(kJfkPhrase));
  }
  {
    auto r = run_parley("transcribe --threads 2 -f vtt " + kJfk, true);
    ASSERT_EQ(r.exit_code, 0) << r.err;
    EXPECT_EQ(r.output.rfind("WEBVTT", 0), 0u) << r.output;
    EXPECT_THAT(r.output, HasSubstr(" --> "));
    EXPECT_THAT(r.output, HasSubstr(kJfkPhrase));
  }
}

TEST(WhisperCli, TranscribesJfkWithTheDefaultModelIntoOutputDir) {
  SKIP_WITHOUT_MODEL();
  // With -o the segments still go to stdout and the document to DIR/<stem>.<ext>.
  const fs::path dir = temp_dir("outdir");
  auto r = run_parley("transcribe --threads 2 -f srt -o " + dir.string() + " " + kJfk);
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_THAT(r.output, HasSubstr(kJfkPhrase));
  EXPECT_THAT(r.output, HasSubstr("[00:00.000 --> "));  // a timestamped segment line
  const fs::path srt = dir / "jfk.srt";
  ASSERT_TRUE(fs::exists(srt)) << r.output;
  const std::string text = read_file(srt);
  EXPECT_EQ(text.rfind("1\n", 0), 0u) << text;
  EXPECT_THAT(text, HasSubstr(" --> "));
  EXPECT_THAT(text, HasSubstr(kJfkPhrase));
}

// One "parley: error: ..." line on stderr, nothing on stdout, the given exit code.
void expect_clean_error(const parley_test::RunResult& r, int code, const std::string& mention) {
  EXPECT_EQ(r.exit_code, code) << r.err;
  EXPECT_EQ(r.err.rfind("parley: error: ", 0), 0u) << r.err;
  EXPECT_EQ(std::count(r.err.begin(), r.err.end(), '\n'), 1) << r.err;
  EXPECT_THAT(r.err, HasSubstr(mention));
  EXPECT_EQ(r.output, "");
}

TEST(WhisperCli, WordTimestampsInVerboseJson) {
  SKIP_WITHOUT_MODEL();
  auto r = run_parley("transcribe --threads 2 --word-timestamps -f verbose_json " + kJfk, true);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const auto j = nlohmann::json::parse(r.output);
  const auto& words = j.at("words");  // OpenAI's shape: stripped words
  ASSERT_EQ(words.size(), 22u);
  EXPECT_EQ(words[0].at("word"), "And");
  EXPECT_EQ(words[21].at("word"), "country");
  size_t n = 0;
  for (const auto& s : j.at("segments")) {
    for (const auto& w : s.at("words")) {  // the reference's shape: leading space, probability
      EXPECT_EQ(w.at("word").get<std::string>()[0], ' ');
      EXPECT_LE(w.at("start").get<double>(), w.at("end").get<double>());
      EXPECT_GT(w.at("probability").get<double>(), 0.0);
      EXPECT_EQ(w.at("end"), words[n++].at("end"));
    }
  }
  EXPECT_EQ(n, words.size());
  auto plain = run_parley("transcribe --threads 2 -f verbose_json " + kJfk, true);
  EXPECT_FALSE(nlohmann::json::parse(plain.output).contains("words"));
}

TEST(WhisperCli, WordOptionsNeedWordTimestamps) {
  expect_clean_error(run_parley("transcribe --hallucination-silence-threshold 2 " + kJfk, true), 2,
                     "need --word-timestamps");
  expect_clean_error(run_parley("transcribe --append-punctuations . " + kJfk, true), 2,
                     "need --word-timestamps");
  expect_clean_error(run_parley("transcribe --highlight-words -f srt " + kJfk, true), 2,
                     "need --word-timestamps");
}

TEST(WhisperCli, TextFileNamedWavIsAnInvalidArgument) {
  SKIP_WITHOUT_MODEL();
  const fs::path wav = temp_dir("badwav") / "notes.wav";
  std::ofstream(wav) << "these are not samples, just some text\n";
  expect_clean_error(run_parley("transcribe " + wav.string(), true), 2, "notes.wav");
}

TEST(WhisperCli, MissingModelDirIsNotFound) {
  const std::string missing = temp_dir("nomodel").string() + "/absent";
  expect_clean_error(run_parley("transcribe --model " + missing + " " + kJfk, true), 3, "absent");
}

TEST(WhisperCli, CorruptConfigJsonIsAnInvalidArgument) {
  SKIP_WITHOUT_MODEL();
  const fs::path dir = temp_dir("badconfig");
  for (const char* f : {"model.bin", "tokenizer.json", "vocabulary.txt"})
    if (fs::exists(default_tiny_en_dir() + "/" + f))
      fs::create_symlink(default_tiny_en_dir() + "/" + f, dir / f);
  std::ofstream(dir / "config.json") << "{\"alignment_heads\": [[1, 0], ";  // cut short
  expect_clean_error(run_parley("transcribe --model " + dir.string() + " " + kJfk, true), 2,
                     "config.json");
}

TEST(WhisperCli, DumpWritesNpyOfTheDocumentedShapes) {
  SKIP_WITHOUT_MODEL();
  const fs::path dir = temp_dir("dump");
  const std::string common = "whisper dump --threads 2 --audio " + kJfk + " ";
  struct Case {
    std::string what;
    std::vector<int64_t> shape;
  };
  // tiny.en: 80 mels, 1500 encoder frames of width 384, 51864 tokens. jfk.wav's greedy
  // decode runs more than 3 steps, so --steps 3 caps it at exactly 3 rows.
  for (const Case& c :
       {Case{"mel", {80, 3000}}, Case{"encoder", {1500, 384}}, Case{"logits", {3, 51864}}}) {
    const fs::path out = dir / (c.what + ".npy");
    auto r = run_parley(common + "--what " + c.what + " --steps 3 --out " + out.string());
    ASSERT_EQ(r.exit_code, 0) << r.output;
    EXPECT_EQ(npy_shape(out), c.shape) << c.what;
  }
}

TEST(WhisperCli, DumpLogitsStopAtEndOfText) {
  SKIP_WITHOUT_MODEL();
  // Without --steps the greedy pass stops at <|endoftext|>: jfk.wav is one short sentence
  // (about 30 tokens with timestamps), far fewer than the 224-step cap.
  const fs::path out = temp_dir("dump_eot") / "logits.npy";
  auto r = run_parley("whisper dump --threads 2 --audio " + kJfk + " --what logits --out " +
                      out.string());
  ASSERT_EQ(r.exit_code, 0) << r.output;
  const auto shape = npy_shape(out);
  ASSERT_EQ(shape.size(), 2u);
  EXPECT_GT(shape[0], 10);
  EXPECT_LT(shape[0], 100);
  EXPECT_EQ(shape[1], 51864);
}

TEST(WhisperCli, BenchWhisperPrintsEveryStage) {
  SKIP_WITHOUT_MODEL();
  auto r = run_parley("bench whisper --threads 2 --runs 1 --decode-tokens 5 --audio " + kJfk, true);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  std::map<std::string, nlohmann::json> by_stage;
  for (const auto& line : lines_of(r.output)) {
    auto j = nlohmann::json::parse(line);  // every line is one JSON object
    EXPECT_EQ(j.at("device"), "cpu");
    EXPECT_EQ(j.at("threads"), 2);
    by_stage[j.at("bench").get<std::string>()] = j;
  }
  ASSERT_EQ(by_stage.size(), 11u) << r.output;
  EXPECT_GT(by_stage.at("whisper_load").at("ms").get<double>(), 0.0);
  EXPECT_GT(by_stage.at("whisper_mel").at("ms").get<double>(), 0.0);
  EXPECT_GT(by_stage.at("whisper_encoder").at("ms_per_window").get<double>(), 0.0);
  EXPECT_GT(by_stage.at("whisper_decode").at("ms_per_token").get<double>(), 0.0);
  EXPECT_EQ(by_stage.at("whisper_decode").at("decode_tokens"), 5);
  // The sot prefix's own pass (tiny.en is English-only: <|startoftranscript|> alone).
  EXPECT_GT(by_stage.at("whisper_prefix").at("ms").get<double>(), 0.0);
  EXPECT_EQ(by_stage.at("whisper_prefix").at("tokens"), 1);
  EXPECT_GT(by_stage.at("whisper_e2e_forced").at("ms").get<double>(), 0.0);
  EXPECT_EQ(by_stage.at("whisper_e2e_forced").at("decode_tokens"), 5);
  // Beam rows at the default beam size 5: a step decodes all 5 rows.
  const auto& beam = by_stage.at("whisper_decode_beam");
  EXPECT_EQ(beam.at("beam"), 5);
  EXPECT_EQ(beam.at("decode_steps"), 5);
  EXPECT_GT(beam.at("ms_per_step").get<double>(), 0.0);
  EXPECT_DOUBLE_EQ(beam.at("ms_per_beam_token").get<double>(),
                   beam.at("ms_per_step").get<double>() / 5);
  // The same rows without beam search's host work (rules kept, no reorder).
  const auto& rows = by_stage.at("whisper_decode_rows");
  EXPECT_EQ(rows.at("rows"), 5);
  EXPECT_EQ(rows.at("decode_steps"), 5);
  EXPECT_GT(rows.at("ms_per_step").get<double>(), 0.0);
  EXPECT_GT(by_stage.at("whisper_e2e_forced_beam").at("ms").get<double>(), 0.0);
  EXPECT_EQ(by_stage.at("whisper_e2e_forced_beam").at("decode_steps"), 5);
  const auto& e2e = by_stage.at("whisper_transcribe");
  EXPECT_NEAR(e2e.at("audio_seconds").get<double>(), 11.0, 0.1);  // jfk.wav is 11 s
  EXPECT_GT(e2e.at("rtf").get<double>(), 0.0);
  EXPECT_THAT(e2e.at("text").get<std::string>(), HasSubstr(kJfkPhrase));
}

TEST(WhisperCli, BenchWhisperRejectsBeamSizeZero) {
  auto r = run_parley("bench whisper --beam-size 0 --audio " + kJfk, true);
  EXPECT_NE(r.exit_code, 0);
  EXPECT_THAT(r.err, HasSubstr("--beam-size must be >= 1"));
}

}  // namespace

// `parley transcribe`'s decoding flags reach the decoder (docs/DECODING.md): a flag that
// changes the result does, bad values are invalid arguments (exit code 2) with a message
// naming the option.
#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>
#include <string>
#include <utility>
#include <vector>

#include "cli/run_parley.h"

namespace {

using parley_test::run_parley;

const std::string kJfk = std::string(PARLEY_TEST_DATA) + "/audio/jfk.wav";
const std::string kHotwords = std::string(PARLEY_TEST_DATA) + "/audio/hotwords.mp3";

bool model_present() {
  return std::filesystem::exists(parley_test::default_tiny_en_dir() + "/model.bin");
}

TEST(DecodingFlags, BadValuesAreInvalidArguments) {
  // Each bad value exits 2 with a message that names its flag.
  for (const auto& [args, named] :
       std::vector<std::pair<std::string, std::string>>{{"--patience 2", "patience"},
                                                        {"--length-penalty 1.5", "length"},
                                                        {"--temperature -1", "temperature"},
                                                        {"--clip-timestamps 1,x", "clip"},
                                                        {"--logprob-threshold abc", "logprob"},
                                                        {"--suppress-tokens 5,q", "suppress"}}) {
    const auto r = run_parley("transcribe " + kJfk + " " + args, true);
    EXPECT_EQ(r.exit_code, 2) << args << ": " << r.err;
    EXPECT_NE(r.err.find(named), std::string::npos) << args << ": " << r.err;
  }
}

TEST(DecodingFlags, FlagsChangeTheTranscript) {
  if (!model_present()) GTEST_SKIP() << "no tiny.en model";
  const auto plain = run_parley("transcribe " + kHotwords);
  ASSERT_EQ(plain.exit_code, 0) << plain.output;
  EXPECT_EQ(plain.output.find("ComfyUI"), std::string::npos) << plain.output;
  const auto hinted = run_parley("transcribe " + kHotwords + " --hotwords ComfyUI --beam-size 2");
  ASSERT_EQ(hinted.exit_code, 0) << hinted.output;
  EXPECT_NE(hinted.output.find("ComfyUI"), std::string::npos) << hinted.output;
  // A clip of the first 2.5 s leaves the rest of jfk out.
  const auto clipped = run_parley("transcribe " + kJfk + " --clip-timestamps 0,2.5");
  ASSERT_EQ(clipped.exit_code, 0) << clipped.output;
  EXPECT_EQ(clipped.output.find("country"), std::string::npos) << clipped.output;
  EXPECT_NE(clipped.output.find("fellow Americans"), std::string::npos) << clipped.output;
}

}  // namespace

// WhisperTokenizer: special-token ids for every vocabulary size, language lookup, the
// sot sequence, non_speech_tokens and decoding, against openai/whisper's tokenizer.py.
#include "whisper/tokenizer.h"

#include <gtest/gtest.h>

#include <filesystem>

#include "engine/error.h"
#include "io/ggml_legacy.h"

namespace parley {
namespace {

const std::string kData = PARLEY_TEST_DATA;
const std::string kMultilingual = kData + "/whisper/multilingual.tiktoken";
const std::string kGpt2 = kData + "/whisper/gpt2.tiktoken";
const std::string kTinyEnJson = std::string(PARLEY_TEST_MODEL_DIR) + "/tokenizer.json";

// Goldens from openai-whisper (pip install tiktoken; pip install openai-whisper --no-deps),
// loading whisper/tokenizer.py by path to avoid its torch import:
//   t = m.get_tokenizer(multilingual, num_languages=n, language=..., task=...)
//   t.eot, t.sot, t.translate, ..., t.timestamp_begin, t.sot_sequence,
//   t.non_speech_tokens, t.decode_with_timestamps([...])
struct SpecialIds {
  int32_t eot, sot, en, translate, transcribe, sot_lm, sot_prev, no_speech, no_timestamps,
      timestamp_begin;
};

void expect_specials(const WhisperTokenizer& t, const SpecialIds& want) {
  EXPECT_EQ(t.eot(), want.eot);
  EXPECT_EQ(t.sot(), want.sot);
  EXPECT_EQ(t.language_token("en"), want.en);
  EXPECT_EQ(t.translate(), want.translate);
  EXPECT_EQ(t.transcribe(), want.transcribe);
  EXPECT_EQ(t.sot_lm(), want.sot_lm);
  EXPECT_EQ(t.sot_prev(), want.sot_prev);
  EXPECT_EQ(t.no_speech(), want.no_speech);
  EXPECT_EQ(t.no_timestamps(), want.no_timestamps);
  EXPECT_EQ(t.timestamp_begin(), want.timestamp_begin);
  EXPECT_EQ(t.timestamp_begin() + 1500, t.n_vocab() - 1);
  EXPECT_EQ(t.token_bytes(t.eot()), "<|endoftext|>");
  EXPECT_EQ(t.token_bytes(t.sot()), "<|startoftranscript|>");
  EXPECT_EQ(t.token_bytes(t.translate()), "<|translate|>");
  EXPECT_EQ(t.token_bytes(t.no_speech()), "<|nospeech|>");
  EXPECT_EQ(t.token_bytes(t.no_timestamps()), "<|notimestamps|>");
  EXPECT_EQ(t.token_bytes(t.timestamp_begin()), "<|0.00|>");
  EXPECT_EQ(t.token_bytes(t.n_vocab() - 1), "<|30.00|>");
}

const WhisperTokenizer& tiny_en() {
  static const WhisperTokenizer t = WhisperTokenizer::from_tiktoken(kGpt2, false, 51864);
  return t;
}
const WhisperTokenizer& tiny() {
  static const WhisperTokenizer t = WhisperTokenizer::from_tiktoken(kMultilingual, true, 51865);
  return t;
}
const WhisperTokenizer& large_v3() {
  static const WhisperTokenizer t = WhisperTokenizer::from_tiktoken(kMultilingual, true, 51866);
  return t;
}

TEST(WhisperTokenizer, EnglishOnlySpecialIds) {
  expect_specials(tiny_en(),
                  {50256, 50257, 50258, 50357, 50358, 50359, 50360, 50361, 50362, 50363});
  EXPECT_FALSE(tiny_en().multilingual());
  EXPECT_EQ(tiny_en().sot_sequence("en", "transcribe"), std::vector<int32_t>{50257});
}

TEST(WhisperTokenizer, MultilingualSpecialIds) {
  expect_specials(tiny(), {50257, 50258, 50259, 50358, 50359, 50360, 50361, 50362, 50363, 50364});
  EXPECT_EQ(tiny().language_codes().size(), 99u);
  EXPECT_EQ(tiny().language_token("su"), 50357);
  EXPECT_THROW(tiny().language_token("yue"), Error);
  EXPECT_THROW(tiny().language_token("xx"), Error);
  EXPECT_EQ(tiny().sot_sequence("en", "transcribe"), (std::vector<int32_t>{50258, 50259, 50359}));
  EXPECT_EQ(tiny().sot_sequence("de", "translate"), (std::vector<int32_t>{50258, 50261, 50358}));
  EXPECT_EQ(tiny().sot_sequence(std::nullopt, "transcribe"), (std::vector<int32_t>{50258, 50359}));
  EXPECT_THROW(tiny().sot_sequence("en", "summarize"), Error);
}

TEST(WhisperTokenizer, LargeV3AddsCantonese) {
  expect_specials(large_v3(),
                  {50257, 50258, 50259, 50359, 50360, 50361, 50362, 50363, 50364, 50365});
  EXPECT_EQ(large_v3().language_codes().size(), 100u);
  EXPECT_EQ(large_v3().language_token("haw"), 50352);
  EXPECT_EQ(large_v3().language_token("yue"), 50358);
  EXPECT_EQ(large_v3().language_of_token(50358), "yue");
  EXPECT_EQ(large_v3().language_of_token(50259), "en");
  EXPECT_EQ(large_v3().language_of_token(50359), "");
  EXPECT_EQ(large_v3().language_codes()[2], "de");
}

TEST(WhisperTokenizer, RejectsVocabSizeThatDoesNotFit) {
  EXPECT_THROW(WhisperTokenizer::from_tiktoken(kMultilingual, true, 51864), Error);
  EXPECT_THROW(WhisperTokenizer::from_tiktoken(kGpt2, false, 51000), Error);
}

TEST(WhisperTokenizer, NonSpeechTokensMatchReference) {
  const std::vector<int32_t> multilingual = {
      1,     2,     7,     8,     9,     10,    14,    25,    26,    27,    28,    29,
      31,    58,    59,    60,    61,    62,    63,    90,    91,    92,    93,    359,
      503,   522,   542,   873,   893,   902,   918,   922,   931,   1350,  1853,  1982,
      2460,  2627,  3246,  3253,  3268,  3536,  3846,  3961,  4183,  4667,  6585,  6647,
      7273,  9061,  9383,  10428, 10929, 11938, 12033, 12331, 12562, 13793, 14157, 14635,
      15265, 15618, 16553, 16604, 18362, 18956, 20075, 21675, 22520, 26130, 26161, 26435,
      28279, 29464, 31650, 32302, 32470, 36865, 42863, 47425, 49870, 50254};
  const std::vector<int32_t> gpt2 = {
      1,     2,     7,     8,     9,     10,    14,    25,    26,    27,    28,    29,
      31,    58,    59,    60,    61,    62,    63,    90,    91,    92,    93,    357,
      366,   438,   532,   685,   705,   796,   930,   1058,  1220,  1267,  1279,  1303,
      1343,  1377,  1391,  1635,  1782,  1875,  2162,  2361,  2488,  3467,  4008,  4211,
      4600,  4808,  5299,  5855,  6329,  7203,  9609,  9959,  10563, 10786, 11420, 11709,
      11907, 13163, 13697, 13700, 14808, 15306, 16410, 16791, 17992, 19203, 19510, 20724,
      22305, 22935, 27007, 30109, 30420, 33409, 34949, 40283, 40493, 40549, 47282, 49146};
  EXPECT_EQ(tiny().non_speech_tokens(), multilingual);
  EXPECT_EQ(large_v3().non_speech_tokens(), multilingual);
  EXPECT_EQ(tiny_en().non_speech_tokens(), gpt2);
}

TEST(WhisperTokenizer, EncodeDecode) {
  // m.get_encoding("multilingual").encode("Hello world, this is a test.")
  const std::vector<int32_t> ids = {15947, 1002, 11, 341, 307, 257, 1500, 13};
  EXPECT_EQ(tiny().encode("Hello world, this is a test."), ids);
  std::vector<int32_t> with_specials = {50258, 50259, 50359, 50364};
  with_specials.insert(with_specials.end(), ids.begin(), ids.end());
  with_specials.push_back(50257);
  EXPECT_EQ(tiny().decode(with_specials), "Hello world, this is a test.");
  EXPECT_EQ(tiny_en().encode("Hello world, this is a test."),
            (std::vector<int32_t>{15496, 995, 11, 428, 318, 257, 1332, 13}));
  // "你" is 3 bytes split over two tokens ([26410] for "你好"; 171 120 234 for "，"):
  // a partial id list decodes to the raw, invalid UTF-8 bytes.
  EXPECT_EQ(tiny().decode(std::vector<int32_t>{171}), "\xef");
  EXPECT_THROW(tiny().decode(std::vector<int32_t>{-1}), Error);
  EXPECT_THROW(tiny().decode(std::vector<int32_t>{51865}), Error);
}

TEST(WhisperTokenizer, DecodeWithTimestamps) {
  // t.decode_with_timestamps([t.sot, t.timestamp_begin + 54, 400, t.timestamp_begin + 1500,
  // t.eot]) == "<|startoftranscript|><|1.08|> And<|30.00|><|endoftext|>" (multilingual)
  const WhisperTokenizer& t = tiny();
  std::vector<int32_t> ids = {t.sot(), t.timestamp_begin() + 54, 400, t.timestamp_begin() + 1500,
                              t.eot()};
  EXPECT_EQ(t.decode_with_timestamps(ids),
            "<|startoftranscript|><|1.08|> And<|30.00|><|endoftext|>");
  EXPECT_EQ(t.decode(ids), " And");
  const WhisperTokenizer& e = tiny_en();
  ids = {e.sot(), e.timestamp_begin() + 54, 400, e.timestamp_begin() + 1500, e.eot()};
  EXPECT_EQ(e.decode_with_timestamps(ids), "<|startoftranscript|><|1.08|>th<|30.00|><|endoftext|>");
  // Every timestamp formats as Python's f"<|{i * 0.02:.2f}|>".
  EXPECT_EQ(t.token_bytes(t.timestamp_begin() + 1), "<|0.02|>");
  EXPECT_EQ(t.token_bytes(t.timestamp_begin() + 727), "<|14.54|>");
}

TEST(WhisperTokenizer, HfJsonMatchesTiktoken) {
  if (!std::filesystem::exists(kTinyEnJson)) GTEST_SKIP() << kTinyEnJson << " missing";
  WhisperTokenizer hf = WhisperTokenizer::from_hf_json(kTinyEnJson, 51864);
  expect_specials(hf, {50256, 50257, 50258, 50357, 50358, 50359, 50360, 50361, 50362, 50363});
  EXPECT_FALSE(hf.multilingual());
  for (const char* text : {"Hello world, this is a test.", "  leading spaces", "Grüße 你好 🍕",
                           "I'm sure you'll say it's 3.14159"})
    EXPECT_EQ(hf.encode(text), tiny_en().encode(text)) << text;
  EXPECT_EQ(hf.non_speech_tokens(), tiny_en().non_speech_tokens());
  // Its added tokens say <|iw|> and <|nocaptions|>; the ids are Whisper's.
  EXPECT_EQ(hf.language_token("he"), 50278);
  EXPECT_EQ(hf.token_bytes(50361), "<|nospeech|>");
  EXPECT_THROW(WhisperTokenizer::from_hf_json(kTinyEnJson, 51865), Error);
}

// whisper.cpp's test models carry the vocabulary (tiny.en: 50256 ranks plus
// <|endoftext|>; tiny: 50257 ranks, the last the empty placeholder), written by an old
// converter that turned invalid UTF-8 tokens into U+FFFD: ASCII still encodes exactly.
TEST(WhisperTokenizer, GgmlVocabMatchesTiktoken) {
  for (bool ml : {false, true}) {
    const std::string path =
        kData + (ml ? "/whisper/for-tests-ggml-tiny.bin" : "/whisper/for-tests-ggml-tiny.en.bin");
    if (!std::filesystem::exists(path)) GTEST_SKIP() << path << " missing";
    io::GgmlWhisperFile file = io::read_ggml_whisper(path);
    WhisperTokenizer t =
        WhisperTokenizer::from_ggml_vocab(file.vocab, ml, file.hparams.n_vocab, path);
    const WhisperTokenizer& ref = ml ? tiny() : tiny_en();
    EXPECT_EQ(t.eot(), ref.eot());
    EXPECT_EQ(t.timestamp_begin(), ref.timestamp_begin());
    for (const char* text : {"Hello world, this is a test.", "  <|endoftext|> spaces",
                             "I'm sure you'll say it's 3.14159  \n\n  x"})
      EXPECT_EQ(t.encode(text), ref.encode(text)) << text;
    // Tokens that are whole UTF-8 characters survived the lossy conversion.
    std::vector<int32_t> ids = ref.encode("Grüße aus München!");
    EXPECT_EQ(t.decode(ids), "Grüße aus München!");
  }
}

}  // namespace
}  // namespace parley

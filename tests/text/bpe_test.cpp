// Byte-level BPE against tiktoken: golden ids for the tiktoken files Whisper ships, byte-exact
// round trips, performance on long text, malformed ranks files, and the Hugging Face loaders.
#include "text/bpe.h"

#include <gtest/gtest.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <random>

#include "engine/error.h"
#include "io/ggml_legacy.h"
#include "text/hf_tokenizer.h"
#include "text/tiktoken.h"

namespace parley {
namespace {

const std::string kData = PARLEY_TEST_DATA;
const std::string kMultilingual = kData + "/whisper/multilingual.tiktoken";
const std::string kGpt2 = kData + "/whisper/gpt2.tiktoken";

struct GoldenCase {
  const char* name;
  std::string text;
  std::vector<int32_t> ids;
};

// Golden ids from openai-whisper's tiktoken encodings (pip install tiktoken;
// pip install openai-whisper --no-deps), without importing torch:
//   import importlib.util as u, site, os
//   s = u.spec_from_file_location("t", os.path.join(site.getsitepackages()[0],
//                                 "whisper", "tokenizer.py"))
//   m = u.module_from_spec(s); s.loader.exec_module(m)
//   m.get_encoding("multilingual").encode(text)  # and m.get_encoding("gpt2")
const GoldenCase kMultilingualCases[] = {
    {"english", "Hello world, this is a test.", {15947, 1002, 11, 341, 307, 257, 1500, 13}},
    {"german",
     "Grüße aus München! Das Wetter ist schön.",
     {20038, 774, 11451, 3437, 35840, 2470, 0, 2846, 343, 27296, 1418, 13527, 13}},
    {"chinese",
     "你好，世界。今天天气很好。",
     {26410, 171, 120, 234, 24486, 1543, 12074, 6135, 42204, 23801, 1543}},
    {"japanese",
     "こんにちは、世界。東京は晴れです。",
     {38088, 1231, 24486, 1543, 18413, 31375, 3065, 5094, 112, 4132, 4767, 1543}},
    {"emoji",
     "I love 🍕 and 🎉! 👨‍👩‍👧",
     {40, 959, 7385, 235, 243, 293, 19034, 231, 0, 36276, 101, 913, 235, 31017, 102, 913, 235,
      31017, 100}},
    {"numbers",
     "In 2024, 3.14159 and 1,000,000 people.",
     {4575, 45237, 11, 805, 13, 7271, 5211, 24, 293, 502, 11, 1360, 11, 1360, 561, 13}},
    {"whitespace",
     "a  b   c\t\td\n\n\ne    ",
     {64, 220, 272, 220, 220, 269, 197, 197, 67, 198, 198, 198, 68, 220, 220, 220, 220}},
    {"leading_spaces", "  leading spaces", {220, 5775, 7673}},
    {"contractions",
     "I'm sure you'll say it's what we've done, he'd they're DON'T",
     {40,  478,  988, 291, 603,  584, 309, 311,   437, 321,
      600, 1096, 11,  415, 1116, 436, 434, 20403, 6,   51}},
    {"repeats",
     "aaaaaaa !!!!!!! ========= hmmmmmmm",
     {16425, 22714, 220, 8153, 4589, 21031, 2945, 2945, 28, 16478, 2174, 37090}},
};
const GoldenCase kGpt2Cases[] = {
    {"english", "Hello world, this is a test.", {15496, 995, 11, 428, 318, 257, 1332, 13}},
    {"german",
     "Grüße aus München! Das Wetter ist schön.",
     {8642, 9116, 39683, 68, 257, 385, 40790, 77, 6607, 0, 29533, 32930, 353, 318, 83, 5513, 48863,
      13}},
    {"chinese", "你好，世界。今天天气很好。", {19526, 254,   25001, 121,   171,   120, 234,   10310,
                                               244,   45911, 234,   16764, 20015, 232, 25465, 25465,
                                               36365, 242,   36181, 230,   25001, 121, 16764}},
    {"japanese",
     "こんにちは、世界。東京は晴れです。",
     {46036, 22174, 28618, 2515, 94,    31676, 23513, 10310, 244,   45911, 234,   16764,
      30266, 109,   12859, 105,  31676, 162,   247,   112,   39258, 30640, 33623, 16764}},
    {"emoji",
     "I love 🍕 and 🎉! 👨‍👩‍👧",
     {40,    1842, 12520, 235, 243,   290, 12520, 236, 231,   0,
      50169, 101,  447,   235, 41840, 102, 447,   235, 41840, 100}},
    {"numbers",
     "In 2024, 3.14159 and 1,000,000 people.",
     {818, 48609, 11, 513, 13, 1415, 19707, 290, 352, 11, 830, 11, 830, 661, 13}},
    {"whitespace",
     "a  b   c\t\td\n\n\ne    ",
     {64, 220, 275, 220, 220, 269, 197, 197, 67, 628, 198, 68, 220, 220, 220, 220}},
    {"leading_spaces", "  leading spaces", {220, 3756, 9029}},
    {"contractions",
     "I'm sure you'll say it's what we've done, he'd they're DON'T",
     {40,   1101, 1654, 345, 1183, 910, 340, 338,   644, 356,
      1053, 1760, 11,   339, 1549, 484, 821, 23917, 6,   51}},
    {"repeats",
     "aaaaaaa !!!!!!! ========= hmmmmmmm",
     {24794, 46071, 220, 13896, 10185, 796, 2559, 289, 40133, 27532}},
};

const BpeTokenizer& multilingual() {
  static const BpeTokenizer bpe = BpeTokenizer::from_ranks(load_tiktoken_ranks(kMultilingual));
  return bpe;
}
const BpeTokenizer& gpt2() {
  static const BpeTokenizer bpe = BpeTokenizer::from_ranks(load_tiktoken_ranks(kGpt2));
  return bpe;
}

void expect_golden(const BpeTokenizer& bpe, std::span<const GoldenCase> cases) {
  for (const GoldenCase& c : cases) {
    EXPECT_EQ(bpe.encode(c.text), c.ids) << c.name;
    EXPECT_EQ(bpe.decode(c.ids), c.text) << c.name;
  }
}

TEST(Tiktoken, LoadsWhisperRankFiles) {
  std::vector<std::string> ml = load_tiktoken_ranks(kMultilingual);
  std::vector<std::string> g2 = load_tiktoken_ranks(kGpt2);
  ASSERT_EQ(ml.size(), 50257u);
  ASSERT_EQ(g2.size(), 50256u);
  EXPECT_EQ(ml[0], "!");
  EXPECT_EQ(ml[220], " ");
  EXPECT_EQ(ml[50256], "");  // "=" placeholder, b'' in Python
  EXPECT_EQ(g2[15496], "Hello");
}

TEST(Bpe, MatchesTiktokenMultilingual) { expect_golden(multilingual(), kMultilingualCases); }
TEST(Bpe, MatchesTiktokenGpt2) { expect_golden(gpt2(), kGpt2Cases); }

TEST(Bpe, EmptyText) {
  EXPECT_TRUE(gpt2().encode("").empty());
  EXPECT_EQ(gpt2().decode({}), "");
}

// Random strings of ASCII, Latin, CJK, emoji code points and whitespace runs.
std::string random_utf8(std::mt19937& rng, int n) {
  static const char32_t kPool[] = {
      U'a',  U'Z',  U' ',  U'\t', U'\n',     U'\'', U'0', U'9', U',', U'é',      U'ß',      U'ж',
      U'你', U'好', U'の', U'🍕',  U'\u200d', U'\r', U's', U'!', U'ü', U'\u00a0', U'\u3000', U'♪'};
  std::uniform_int_distribution<size_t> pick(0, std::size(kPool) - 1);
  std::uniform_int_distribution<uint32_t> any_cp(0x20, 0x10ffff);
  std::string out;
  for (int i = 0; i < n; ++i) {
    char32_t cp = i % 7 == 3 ? any_cp(rng) : kPool[pick(rng)];
    if (cp >= 0xd800 && cp <= 0xdfff) cp = U'x';
    if (cp < 0x80) {
      out += char(cp);
    } else if (cp < 0x800) {
      out += char(0xc0 | (cp >> 6));
      out += char(0x80 | (cp & 0x3f));
    } else if (cp < 0x10000) {
      out += char(0xe0 | (cp >> 12));
      out += char(0x80 | ((cp >> 6) & 0x3f));
      out += char(0x80 | (cp & 0x3f));
    } else {
      out += char(0xf0 | (cp >> 18));
      out += char(0x80 | ((cp >> 12) & 0x3f));
      out += char(0x80 | ((cp >> 6) & 0x3f));
      out += char(0x80 | (cp & 0x3f));
    }
  }
  return out;
}

TEST(Bpe, RoundTripsRandomUtf8) {
  std::mt19937 rng(1234);
  for (int i = 0; i < 300; ++i) {
    std::string s = random_utf8(rng, 1 + i % 40);
    EXPECT_EQ(multilingual().decode(multilingual().encode(s)), s);
    EXPECT_EQ(gpt2().decode(gpt2().encode(s)), s);
  }
}

TEST(Bpe, RoundTripsInvalidUtf8Bytes) {
  // Not reachable from tiktoken (Python str), but bytes must never be lost.
  const std::string s = std::string("ab\xff\xfe cd \xc3", 9) + std::string(1, '\0') + "z";
  EXPECT_EQ(gpt2().decode(gpt2().encode(s)), s);
}

TEST(Bpe, EncodesLongTextFast) {
  std::mt19937 rng(7);
  std::string text;
  while (text.size() < 100 * 1024) {
    text += "The quick brown fox jumps over the lazy dog; it's 1234 o'clock. ";
    text += random_utf8(rng, 20);
  }
  text += std::string(20000, ' ') + "x";  // one long whitespace piece
  auto t0 = std::chrono::steady_clock::now();
  std::vector<int32_t> ids = multilingual().encode(text);
  double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  EXPECT_EQ(multilingual().decode(ids), text);
  EXPECT_LT(s, 0.5) << "encoding " << text.size() << " bytes took " << s << " s";
}

TEST(Bpe, SpecialsOnlyWhenAsked) {
  BpeConfig config;
  for (int b = 0; b < 256; ++b) config.vocab.emplace_back(std::string(1, char(b)), b);
  config.vocab.emplace_back("ab", 256);
  config.specials = {{"<|end|>", 300}, {"<|end|>x", 301}};
  BpeTokenizer bpe(std::move(config));
  EXPECT_EQ(bpe.encode("ab<|end|>"),
            (std::vector<int32_t>{256, '<', '|', 'e', 'n', 'd', '|', '>'}));
  EXPECT_EQ(bpe.encode_with_specials("ab<|end|>ab<|end|>x"),
            (std::vector<int32_t>{256, 300, 256, 301}));
  EXPECT_EQ(bpe.decode(std::vector<int32_t>{300, 256}), "<|end|>ab");
  EXPECT_THROW(bpe.decode(std::vector<int32_t>{299}), Error);
}

TEST(Bpe, RejectsDuplicateTokensAndBadRegex) {
  BpeConfig dup;
  dup.vocab = {{"a", 0}, {"a", 1}};
  EXPECT_THROW(BpeTokenizer{dup}, Error);
  BpeConfig bad_regex;
  bad_regex.vocab = {{"a", 0}};
  bad_regex.pattern = "(unclosed";
  EXPECT_THROW(BpeTokenizer{bad_regex}, Error);
}

// Expects parse_tiktoken_ranks(contents) to throw naming `where` and `what`.
void expect_ranks_error(const std::string& contents, const std::string& where,
                        const std::string& what) {
  try {
    parse_tiktoken_ranks(contents, "bad.tiktoken");
    ADD_FAILURE() << "no error for: " << contents;
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), ErrorKind::invalid_argument);
    std::string msg = e.what();
    EXPECT_NE(msg.find(where), std::string::npos) << msg;
    EXPECT_NE(msg.find(what), std::string::npos) << msg;
  }
}

TEST(Tiktoken, RejectsMalformedFiles) {
  // "YQ==" a, "Yg==" b, "YWI=" ab
  EXPECT_EQ(parse_tiktoken_ranks("YQ== 0\nYg== 1\n\nYWI= 2\n", "ok").size(), 3u);
  expect_ranks_error("YQ== 0\nY!== 1\n", "bad.tiktoken:2", "bad base64");
  expect_ranks_error("YQ== 0\nYg= 1\n", "bad.tiktoken:2", "bad base64");
  expect_ranks_error("YQ== 0\nYQ== 1\n", "bad.tiktoken:2", "duplicate token");
  expect_ranks_error("YQ== 0\nYg== 0\n", "bad.tiktoken:2", "duplicate rank 0");
  expect_ranks_error("YQ== 0\nYg== 2\n", "bad.tiktoken", "rank 1 is missing");
  expect_ranks_error("YQ== 0\nYg==\n", "bad.tiktoken:2", "expected");
  expect_ranks_error("YQ== 0\nYg== 1x\n", "bad.tiktoken:2", "bad rank");
  expect_ranks_error("", "bad.tiktoken", "no ranks");
  expect_ranks_error("YQ== 0\n= 1\n== 2\n", "bad.tiktoken:3", "duplicate token");
  EXPECT_THROW(load_tiktoken_ranks(kData + "/whisper/no-such.tiktoken"), Error);
}

TEST(HfTokenizer, ByteToUnicodeIsGpt2Table) {
  EXPECT_EQ(byte_to_unicode(' '), U'Ġ');
  EXPECT_EQ(byte_to_unicode('\n'), U'Ċ');
  EXPECT_EQ(byte_to_unicode('A'), U'A');
  EXPECT_EQ(byte_to_unicode(0xad), char32_t(0x143));
  EXPECT_EQ(unicode_to_bytes("ĠHello", "t"), " Hello");
  EXPECT_THROW(unicode_to_bytes("\xe4\xbd\xa0", "t"), Error);
}

const std::string kTinyEnJson = std::string(PARLEY_TEST_MODEL_DIR) + "/tokenizer.json";

TEST(HfTokenizer, WhisperTinyEnJsonMatchesGpt2Tiktoken) {
  if (!std::filesystem::exists(kTinyEnJson)) GTEST_SKIP() << kTinyEnJson << " missing";
  HfTokenizer hf = load_hf_tokenizer_json(kTinyEnJson);
  expect_golden(hf.bpe, kGpt2Cases);
  std::mt19937 rng(99);
  for (int i = 0; i < 200; ++i) {
    std::string s = random_utf8(rng, 1 + i % 30);
    EXPECT_EQ(hf.bpe.encode(s), gpt2().encode(s)) << s;
  }
  EXPECT_EQ(hf.bpe.special_id("<|endoftext|>"), 50256);
  EXPECT_EQ(hf.bpe.special_id("<|notimestamps|>"), 50362);
  EXPECT_EQ(hf.added_tokens.size(), 107u);
}

// Golden ids from Hugging Face tokenizers (pip install tokenizers):
//   Tokenizer.from_file("/work/shared/data/llm/tokenizer.json")
//       .encode(text, add_special_tokens=False).ids
TEST(HfTokenizer, Qwen3SplitRegex) {
  const std::string path = kData + "/llm/tokenizer.json";
  if (!std::filesystem::exists(path)) GTEST_SKIP() << path << " missing";
  HfTokenizer hf = load_hf_tokenizer_json(path);
  const GoldenCase cases[] = {
      {"english", "Hello world, this is a test.", {9707, 1879, 11, 419, 374, 264, 1273, 13}},
      {"german",
       "Grüße aus München! Das Wetter ist schön.",
       {6464, 2391, 23455, 9421, 89266, 0, 19000, 467, 21405, 5999, 74764, 13}},
      {"chinese",
       "你好，世界。今天天气很好。",
       {108386, 3837, 99489, 1773, 100644, 104307, 101243, 1773}},
      {"numbers",
       "In 2024, 3.14159 and 1,000,000 people.",
       {641, 220, 17,  15, 17, 19, 11, 220, 18, 13, 16, 19, 16,   20,
        24,  323, 220, 16, 11, 15, 15, 15,  11, 15, 15, 15, 1251, 13}},
      {"whitespace",
       "a  b   c\t\td\n\n\ne    ",
       {64, 220, 293, 256, 272, 197, 2698, 1406, 68, 257}},
      {"contractions",
       "I'M sure you'll say it's DON'T",
       {40, 27603, 2704, 498, 3278, 1977, 432, 594, 44273, 17323}},
  };
  expect_golden(hf.bpe, cases);
  EXPECT_EQ(hf.bpe.encode_with_specials("<|im_start|>user\nHi<|im_end|>"),
            (std::vector<int32_t>{151644, 872, 198, 13048, 151645}));
}

TEST(HfTokenizer, VocabJsonAndMergesTxt) {
  // A tiny GPT-2 style pair: "Ġ" is the space byte; merges build " a" then " ab".
  auto dir = std::filesystem::temp_directory_path() / "parley_hf_vocab_test";
  std::filesystem::create_directories(dir);
  std::ofstream(dir / "vocab.json") << R"({"a": 0, "b": 1, "Ġ": 2, "Ġa": 3, "Ġab": 4, "ab": 5})";
  std::ofstream(dir / "merges.txt") << "#version: 0.2\nĠ a\nĠa b\n";
  BpeTokenizer bpe =
      load_hf_vocab_merges((dir / "vocab.json").string(), (dir / "merges.txt").string());
  // "ab" is in the vocab but no merge makes it: HF semantics keep a, b apart.
  EXPECT_EQ(bpe.encode("ab ab"), (std::vector<int32_t>{0, 1, 4}));
  std::ofstream(dir / "merges.txt") << "Ġ c\n";
  EXPECT_THROW(load_hf_vocab_merges((dir / "vocab.json").string(), (dir / "merges.txt").string()),
               Error);
}

TEST(Bpe, IgnoreMergesTakesWholeTokens) {
  BpeConfig config;
  config.vocab = {{"a", 0}, {"b", 1}, {"c", 2}, {"ab", 3}, {"abc", 4}, {"bc", 5}};
  config.merges = {{1, 2}, {0, 1}};  // "b c" before "a b": "abc" has no merge path
  BpeConfig ignoring = config;
  ignoring.ignore_merges = true;
  EXPECT_EQ(BpeTokenizer(std::move(config)).encode("abc"), (std::vector<int32_t>{0, 5}));
  EXPECT_EQ(BpeTokenizer(std::move(ignoring)).encode("abc"), (std::vector<int32_t>{4}));
}

TEST(GgmlVocab, RealFileVocab) {
  const std::string path = kData + "/whisper/for-tests-ggml-tiny.bin";
  if (!std::filesystem::exists(path)) GTEST_SKIP() << path << " missing";
  io::GgmlWhisperFile file = io::read_ggml_whisper(path);
  BpeTokenizer bpe = bpe_from_ggml_vocab(file.vocab, path);
  // This test file's vocabulary is lossy (U+FFFD for invalid UTF-8 tokens): the ASCII
  // goldens still match tiktoken.
  for (const GoldenCase& c : kMultilingualCases) {
    if (std::string_view(c.name) == "english" || std::string_view(c.name) == "numbers" ||
        std::string_view(c.name) == "contractions" || std::string_view(c.name) == "whitespace") {
      EXPECT_EQ(bpe.encode(c.text), c.ids) << c.name;
    }
    EXPECT_EQ(bpe.token_id("\xef\xbf\xbd"), 94) << "lowest id of the repeated token";
  }
}

TEST(GgmlVocab, RanksAreIds) {
  std::vector<std::string> ranks = load_tiktoken_ranks(kGpt2);
  BpeTokenizer bpe = bpe_from_ggml_vocab(ranks, "ggml");
  expect_golden(bpe, kGpt2Cases);
}

}  // namespace
}  // namespace parley

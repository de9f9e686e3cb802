// parley::Tokenizer without the reference venv: a hand-written SentencePiece-style
// tokenizer.json (byte fallback, Prepend + Replace normalizer, Strip decoder), the
// StreamDecoder's invariants, tokenizer_config.json flags, bad input, and encode speed on
// Qwen3's tokenizer.json (skipped when the shared data is missing).
#include <gtest/gtest.h>

#include <chrono>
#include <filesystem>
#include <fstream>

#include "engine/error.h"
#include "text/tokenizer.h"
#include "text/tokenizer_unicode.h"

namespace parley {
namespace {

namespace fs = std::filesystem;

fs::path temp_dir(const std::string& name) {
  fs::path d = fs::temp_directory_path() / ("parley_tokenizer_test_" + name);
  fs::remove_all(d);
  fs::create_directories(d);
  return d;
}

void write(const fs::path& p, const std::string& text) {
  std::ofstream(p, std::ios::binary) << text;
}

// vocab: <unk> <s> </s>, the 256 byte tokens, then ▁ h i ▁h ▁hi.
std::string sentencepiece_json(const std::string& post_processor) {
  std::string vocab = R"("<unk>": 0, "<s>": 1, "</s>": 2)";
  char buf[32];
  for (int b = 0; b < 256; ++b) {
    snprintf(buf, sizeof buf, R"(, "<0x%02X>": %d)", b, 3 + b);
    vocab += buf;
  }
  vocab += R"(, "▁": 259, "h": 260, "i": 261, "▁h": 262, "▁hi": 263)";
  return R"({"version": "1.0", "added_tokens": [
      {"id": 0, "content": "<unk>", "special": true, "normalized": false},
      {"id": 1, "content": "<s>", "special": true, "normalized": false},
      {"id": 2, "content": "</s>", "special": true, "normalized": false}],
    "normalizer": {"type": "Sequence", "normalizers": [
      {"type": "Prepend", "prepend": "▁"},
      {"type": "Replace", "pattern": {"String": " "}, "content": "▁"}]},
    "pre_tokenizer": null,
    "post_processor": )" +
         post_processor + R"(,
    "decoder": {"type": "Sequence", "decoders": [
      {"type": "Replace", "pattern": {"String": "▁"}, "content": " "},
      {"type": "ByteFallback"}, {"type": "Fuse"},
      {"type": "Strip", "content": " ", "start": 1, "stop": 0}]},
    "model": {"type": "BPE", "byte_fallback": true, "unk_token": "<unk>", "fuse_unk": true,
      "vocab": {)" +
         vocab + R"(}, "merges": ["▁ h", "▁h i"]}})";
}

const char* kBosTemplate = R"({"type": "TemplateProcessing",
    "single": [{"SpecialToken": {"id": "<s>", "type_id": 0}}, {"Sequence": {"id": "A", "type_id": 0}}],
    "pair": [], "special_tokens": {"<s>": {"id": "<s>", "ids": [1], "tokens": ["<s>"]}}})";

Tokenizer small_sentencepiece() {
  fs::path d = temp_dir("sp");
  write(d / "tokenizer.json", sentencepiece_json(kBosTemplate));
  return Tokenizer::from_file((d / "tokenizer.json").string());
}

TEST(Tokenizer, SentencePieceByteFallbackAndTemplate) {
  Tokenizer tok = small_sentencepiece();
  // "hi €" -> ▁hi ▁ <E2> <82> <AC>; BOS from the template.
  std::vector<int32_t> want = {1, 263, 259, 3 + 0xE2, 3 + 0x82, 3 + 0xAC};
  EXPECT_EQ(tok.encode("hi €"), want);
  EXPECT_EQ(tok.encode("hi €", false), std::vector<int32_t>(want.begin() + 1, want.end()));
  EXPECT_EQ(tok.decode(want), "<s> hi €");
  EXPECT_EQ(tok.decode(want, true), "hi €");
  EXPECT_EQ(tok.bos_id(), 1);
  EXPECT_EQ(tok.token_id("▁hi"), 263);
  EXPECT_EQ(tok.token_bytes(263), " hi");
  EXPECT_EQ(tok.token_bytes(3 + 0xE2), "\xE2");
  // A cut character decodes to one U+FFFD per byte (ByteFallback), then the text goes on.
  std::vector<int32_t> cut = {3 + 0xE2, 3 + 0x82, 260};
  EXPECT_EQ(tok.decode(cut), "\xEF\xBF\xBD\xEF\xBF\xBDh");
  // <s> in the text is the special token; encode of "" adds only BOS.
  EXPECT_EQ(tok.encode("<s>hi", false), (std::vector<int32_t>{1, 263}));
  EXPECT_EQ(tok.encode(""), (std::vector<int32_t>{1}));
}

TEST(Tokenizer, StreamDecoderHoldsCutCharactersAndConcatenates) {
  Tokenizer tok = small_sentencepiece();
  std::vector<int32_t> ids = {263,      259,      3 + 0xE2, 3 + 0x82, 3 + 0xAC, 259,      3 + 0xF0,
                              3 + 0x9F, 3 + 0x91, 3 + 0x8B, 262,      261,      3 + 0xE2, 263};
  StreamDecoder stream(tok);
  std::vector<std::string> pieces;
  std::string all;
  for (int32_t id : ids) {
    pieces.push_back(stream.push(id));
    EXPECT_EQ(utf8_invalid_offset(pieces.back()), std::string::npos);
    all += pieces.back();
  }
  all += stream.flush();
  EXPECT_EQ(all, tok.decode(ids));
  EXPECT_EQ(pieces[0], "hi");  // the leading space is stripped, as decode does
  EXPECT_EQ(pieces[1], " ");
  EXPECT_EQ(pieces[2], "");  // <E2> waits for the rest of "€"
  EXPECT_EQ(pieces[3], "");
  EXPECT_EQ(pieces[4], "€");
}

TEST(Tokenizer, ConfigFlagsApplyWithoutPostProcessor) {
  fs::path d = temp_dir("flags");
  write(d / "tokenizer.json", sentencepiece_json("null"));
  write(d / "tokenizer_config.json",
        R"({"bos_token": "<s>", "eos_token": {"content": "</s>"}, "add_bos_token": true,
            "add_eos_token": true})");
  write(d / "generation_config.json", R"({"eos_token_id": [2, 0]})");
  Tokenizer tok = Tokenizer::from_dir(d.string());
  EXPECT_EQ(tok.encode("hi"), (std::vector<int32_t>{1, 263, 2}));
  EXPECT_EQ(tok.encode("hi", false), (std::vector<int32_t>{263}));
  EXPECT_EQ(tok.eos_id(), 2);
  EXPECT_EQ(tok.eos_ids(), (std::vector<int32_t>{2, 0}));
  // A template in tokenizer.json wins over the flags.
  write(d / "tokenizer.json", sentencepiece_json(kBosTemplate));
  EXPECT_EQ(Tokenizer::from_dir(d.string()).encode("hi"), (std::vector<int32_t>{1, 263}));
}

void expect_error(const std::string& json, ErrorKind kind, const std::string& needle) {
  fs::path d = temp_dir("bad");
  write(d / "tokenizer.json", json);
  try {
    Tokenizer::from_file((d / "tokenizer.json").string());
    ADD_FAILURE() << "loaded: " << json.substr(0, 80);
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), kind) << e.what();
    EXPECT_NE(std::string(e.what()).find(needle), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("[tokenizer]"), std::string::npos) << e.what();
  }
}

TEST(Tokenizer, BadInputIsAClearError) {
  expect_error("{\"model\": ", ErrorKind::invalid_argument, "bad JSON");
  expect_error(R"({"added_tokens": []})", ErrorKind::invalid_argument, "no model");
  expect_error(R"({"model": {"type": "WordPiece", "vocab": {}}})", ErrorKind::unsupported,
               "WordPiece");
  expect_error(R"({"model": {"type": "Unigram", "vocab": []}})", ErrorKind::unsupported, "Unigram");
  const std::string model = R"("model": {"type": "BPE", "vocab": {"a": 0, "b": 1}, "merges": [])";
  expect_error("{" + model + R"(}, "normalizer": {"type": "Precompiled"}})", ErrorKind::unsupported,
               "Precompiled");
  expect_error("{" + model + R"(}, "pre_tokenizer": {"type": "UnicodeScripts"}})",
               ErrorKind::unsupported, "UnicodeScripts");
  expect_error("{" + model + R"(}, "decoder": {"type": "WordPiece"}})", ErrorKind::unsupported,
               "WordPiece");
  expect_error(
      "{" + model +
          R"(}, "pre_tokenizer": {"type": "Split", "pattern": {"Regex": "(("}, "behavior": "Isolated"}})",
      ErrorKind::invalid_argument, "regex");
  expect_error(R"({"model": {"type": "BPE", "vocab": {"a": 0, "b": 1}, "merges": ["a b"]}})",
               ErrorKind::invalid_argument, "merge 0");
  try {
    Tokenizer::from_file("/nonexistent/tokenizer.json");
    ADD_FAILURE();
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), ErrorKind::not_found);
  }
  Tokenizer tok = small_sentencepiece();
  EXPECT_THROW(tok.encode("bad \xff utf-8"), Error);
  std::vector<int32_t> unknown = {263, 99999};
  EXPECT_THROW(tok.decode(unknown), Error);
  StreamDecoder stream(tok);
  EXPECT_THROW(stream.push(-1), Error);
}

TEST(Tokenizer, Qwen3EncodesFastAndStreams) {
  const fs::path path = fs::path(PARLEY_TEST_DATA) / "llm/tokenizer.json";
  if (!fs::exists(path)) GTEST_SKIP() << "no " << path;
  Tokenizer tok = Tokenizer::from_file(path.string());
  std::string unit =
      "The quick brown fox 🦊 jumps over 13 lazy dogs. 中文测试，你好！ مرحبا "
      "café\n"
      "def f(x):\n\treturn x ** 2  # comment\n<|im_start|>user\nhi<|im_end|>\n";
  std::string text;
  for (int i = 0; text.size() < 100 * 1024; ++i) text += unit + std::to_string(i) + " ";
  auto t0 = std::chrono::steady_clock::now();
  std::vector<int32_t> ids = tok.encode(text);
  double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  EXPECT_LT(seconds, 1.0) << "100 KB took " << seconds << " s";
  EXPECT_EQ(tok.decode(ids), text);
  StreamDecoder stream(tok);
  std::string all;
  for (size_t i = 0; i < 3000 && i < ids.size(); ++i) {
    std::string piece = stream.push(ids[i]);
    ASSERT_EQ(utf8_invalid_offset(piece), std::string::npos) << "push " << i;
    all += piece;
  }
  all += stream.flush();
  EXPECT_EQ(all, tok.decode(std::span(ids).first(std::min<size_t>(3000, ids.size()))));
  EXPECT_EQ(tok.token_id("<|im_end|>"), 151645);
  EXPECT_TRUE(tok.is_special(151645));
}

}  // namespace
}  // namespace parley

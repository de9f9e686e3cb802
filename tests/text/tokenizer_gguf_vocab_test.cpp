// Tokenizer::from_gguf against llama.cpp's test vocabularies: for every ggml-vocab-*.gguf
// with .inp/.out vectors (inputs split by "\n__ggml_vocab_test__\n", one line of
// space-separated ids per input, as llama.cpp's tests/test-tokenizer-0 reads them; the ids
// are what the model's Hugging Face tokenizer gives), encode without special tokens must
// give exactly those ids, and decode(encode(x)) must give x back (SentencePiece vocabularies:
// up to the one leading space they prepend). Skips without .venv-llm.
#include <gtest/gtest.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "engine/error.h"
#include "io/gguf.h"
#include "text/tokenizer.h"
#include "text/tokenizer_unicode.h"

namespace parley {
namespace {

namespace fs = std::filesystem;

fs::path vocab_dir() { return fs::path(PARLEY_LLM_VENV) / "share/llama.cpp/models"; }

std::string slurp(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

struct Case {
  std::string text;
  std::vector<int32_t> ids;
};

std::vector<Case> read_cases(const std::string& vocab) {
  const fs::path base = vocab_dir() / ("ggml-vocab-" + vocab + ".gguf");
  std::string inp = slurp(base.string() + ".inp");
  std::string out = slurp(base.string() + ".out");
  const std::string sep = "\n__ggml_vocab_test__\n";
  std::vector<std::string> texts;
  size_t pos = 0;
  for (size_t hit; (hit = inp.find(sep, pos)) != std::string::npos; pos = hit + sep.size())
    texts.push_back(inp.substr(pos, hit - pos));
  if (pos < inp.size()) texts.push_back(inp.substr(pos));  // a last input without a marker
  std::vector<Case> cases;
  std::istringstream lines(out);
  std::string line;
  for (const std::string& t : texts) {
    if (!std::getline(lines, line)) break;
    Case c{t, {}};
    std::istringstream ids(line);
    for (int64_t id; ids >> id;) c.ids.push_back(int32_t(id));
    cases.push_back(std::move(c));
  }
  EXPECT_EQ(cases.size(), texts.size()) << vocab << ": fewer output lines than inputs";
  return cases;
}

// The vocabularies with vectors that from_gguf supports; the SentencePiece ones round-trip
// up to a leading space.
struct Vocab {
  const char* name;
  bool sentencepiece;
};
const Vocab kSupported[] = {
    {"command-r", false}, {"deepseek-coder", false}, {"deepseek-llm", false}, {"falcon", false},
    {"gemma-4", true},    {"gpt-2", false},          {"llama-bpe", false},    {"llama-spm", true},
    {"mpt", false},       {"phi-3", true},           {"qwen2", false},        {"qwen35", false},
    {"refact", false},    {"starcoder", false},
};
// Vocabularies with vectors whose tokenizer model parley does not implement.
const char* const kSkipped[] = {
    "bert-bge",  // WordPiece (tokenizer.ggml.model "bert")
};

class GgufVocab : public ::testing::TestWithParam<Vocab> {};

TEST_P(GgufVocab, MatchesReferenceIds) {
  const std::string vocab = GetParam().name;
  const fs::path path = vocab_dir() / ("ggml-vocab-" + vocab + ".gguf");
  if (!fs::exists(path)) GTEST_SKIP() << "no " << path << ": run scripts/setup_llm_reference.sh";
  Tokenizer tok = Tokenizer::from_gguf(io::read_gguf(path.string()));
  int mismatches = 0;
  for (const Case& c : read_cases(vocab)) {
    std::vector<int32_t> got = tok.encode(c.text, /*add_special_tokens=*/false);
    if (got != c.ids && ++mismatches <= 5) {
      std::ostringstream msg;
      for (int32_t id : got) msg << id << ' ';
      ADD_FAILURE() << vocab << ": \"" << c.text << "\"\n  got      " << msg.str()
                    << "\n  expected " << testing::PrintToString(c.ids);
    }
    std::string back = tok.decode(got);
    std::string want = c.text;
    if (GetParam().sentencepiece && !want.empty() && back.size() + 1 == want.size() &&
        want[0] == ' ')
      want.erase(0, 1);
    EXPECT_EQ(back, want) << vocab << ": decode(encode(x)) != x";
    // Streaming the same ids: valid UTF-8 pieces that add up to decode.
    StreamDecoder stream(tok);
    std::string streamed;
    for (int32_t id : got) {
      std::string piece = stream.push(id);
      EXPECT_EQ(utf8_invalid_offset(piece), std::string::npos) << vocab << ": " << c.text;
      streamed += piece;
    }
    EXPECT_EQ(streamed + stream.flush(), back) << vocab << ": stream of \"" << c.text << "\"";
  }
  EXPECT_EQ(mismatches, 0) << vocab;
}

INSTANTIATE_TEST_SUITE_P(LlamaCppVectors, GgufVocab, ::testing::ValuesIn(kSupported),
                         [](const auto& info) {
                           std::string n = info.param.name;
                           for (char& c : n)
                             if (c == '-') c = '_';
                           return n;
                         });

// Every vocabulary that ships vectors is either checked above or listed as skipped.
TEST(GgufVocabList, EveryVectorFileIsCovered) {
  if (!fs::exists(vocab_dir())) GTEST_SKIP() << "no .venv-llm: run scripts/setup_llm_reference.sh";
  for (const auto& e : fs::directory_iterator(vocab_dir())) {
    std::string f = e.path().filename().string();
    const std::string prefix = "ggml-vocab-", suffix = ".gguf.inp";
    if (f.rfind(prefix, 0) != 0 || !f.ends_with(suffix)) continue;
    std::string name = f.substr(prefix.size(), f.size() - prefix.size() - suffix.size());
    bool known = false;
    for (const Vocab& v : kSupported) known = known || name == v.name;
    for (const char* s : kSkipped) known = known || name == s;
    EXPECT_TRUE(known) << name << " has vectors but is neither tested nor listed as skipped";
  }
}

// 100 KB of mixed text encodes well under a second with the score-merged SentencePiece
// vocabulary (one piece: no pre-tokenizer) and with a byte-level one, and round-trips.
TEST(GgufVocabList, EncodesLongTextFast) {
  for (const char* vocab : {"llama-spm", "llama-bpe", "gemma-4"}) {
    const fs::path path = vocab_dir() / ("ggml-vocab-" + std::string(vocab) + ".gguf");
    if (!fs::exists(path)) GTEST_SKIP() << "no " << path;
    Tokenizer tok = Tokenizer::from_gguf(io::read_gguf(path.string()));
    std::string text;
    for (int i = 0; text.size() < 100 * 1024; ++i)
      text += "Hello world 🦊 " + std::to_string(i) + " 中文测试 café  \n\tdef f(x): return x\n";
    auto t0 = std::chrono::steady_clock::now();
    std::vector<int32_t> ids = tok.encode(text, false);
    double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    EXPECT_LT(s, 1.0) << vocab << ": 100 KB took " << s << " s";
    std::string back = tok.decode(ids);
    EXPECT_TRUE(back == text || " " + back == text) << vocab;
  }
}

// BOS, EOS and special tokens as llama.cpp's loader sets them.
TEST(GgufVocabList, SpecialTokens) {
  const fs::path bpe = vocab_dir() / "ggml-vocab-llama-bpe.gguf";
  const fs::path spm = vocab_dir() / "ggml-vocab-llama-spm.gguf";
  if (!fs::exists(bpe) || !fs::exists(spm)) GTEST_SKIP() << "no llama vocabularies";
  Tokenizer llama3 = Tokenizer::from_gguf(io::read_gguf(bpe.string()));
  EXPECT_EQ(llama3.bos_id(), 128000);
  EXPECT_EQ(llama3.eos_id(), 128001);
  std::vector<int32_t> ids = llama3.encode("hi<|eot_id|>");  // the Llama 3 family adds BOS
  ASSERT_EQ(ids.size(), 3u);
  EXPECT_EQ(ids.front(), 128000);
  EXPECT_EQ(ids.back(), llama3.token_id("<|eot_id|>"));
  EXPECT_TRUE(llama3.is_special(ids.back()));
  EXPECT_EQ(llama3.decode(ids, true), "hi");
  EXPECT_EQ(llama3.token_bytes(llama3.token_id("\xC4\xA0hello")), " hello");  // "Ġhello"
  Tokenizer llama2 = Tokenizer::from_gguf(io::read_gguf(spm.string()));
  EXPECT_EQ(llama2.encode(""), (std::vector<int32_t>{1}));
  EXPECT_EQ(llama2.encode("<s>", false), (std::vector<int32_t>{1}));
  EXPECT_EQ(llama2.vocab_size(), 32000);
  EXPECT_EQ(llama2.eos_ids(), (std::vector<int32_t>{2}));
}

TEST(GgufVocabList, UnsupportedModelIsAClearError) {
  const fs::path path = vocab_dir() / "ggml-vocab-bert-bge.gguf";
  if (!fs::exists(path)) GTEST_SKIP() << "no " << path;
  try {
    Tokenizer::from_gguf(io::read_gguf(path.string()));
    FAIL() << "WordPiece vocabulary loaded";
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), ErrorKind::unsupported);
    EXPECT_NE(std::string(e.what()).find("bert"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace parley

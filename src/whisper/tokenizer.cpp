// WhisperTokenizer: special-token layout and text helpers of openai/whisper's
// whisper/tokenizer.py over a byte-level BpeTokenizer.
#include "whisper/tokenizer.h"

#include <algorithm>
#include <array>
#include <cstdio>
#include <set>

#include "engine/error.h"
#include "text/bpe.h"
#include "text/hf_tokenizer.h"
#include "text/tiktoken.h"

namespace parley {
namespace {

// whisper/tokenizer.py LANGUAGES, in its order (the order of the language token ids);
// models with n_vocab 51865 use the first 99, large-v3 (51866) all 100.
constexpr std::array<std::string_view, 100> kLanguages = {
    "en", "zh", "de", "es",  "ru", "ko", "fr", "ja", "pt", "tr", "pl", "ca", "nl", "ar", "sv",
    "it", "id", "hi", "fi",  "vi", "he", "uk", "el", "ms", "cs", "ro", "da", "hu", "ta", "no",
    "th", "ur", "hr", "bg",  "lt", "la", "mi", "ml", "cy", "sk", "te", "fa", "lv", "bn", "sr",
    "az", "sl", "kn", "et",  "mk", "br", "eu", "is", "hy", "ne", "mn", "bs", "kk", "sq", "sw",
    "gl", "mr", "pa", "si",  "km", "sn", "yo", "so", "af", "oc", "ka", "be", "tg", "sd", "gu",
    "am", "yi", "lo", "uz",  "fo", "ht", "ps", "tk", "nn", "mt", "sa", "lb", "my", "bo", "tl",
    "mg", "as", "tt", "haw", "ln", "ha", "ba", "jw", "su", "yue"};
// Specials other than languages and timestamps: eot, sot, then after the languages
// translate, transcribe, startoflm, startofprev, nospeech, notimestamps.
constexpr int kFixedSpecials = 8;
constexpr int kTimestamps = 1501;  // <|0.00|> .. <|30.00|>, 0.02 s apart
[[noreturn]] void fail(const std::string& name, const std::string& problem) {
  throw Error(ErrorKind::invalid_argument, "[tokenizer] " + name + ": " + problem);
}

// Hugging Face's Whisper tokenizer.json files keep two older names: <|iw|> for Hebrew
// and <|nocaptions|> for <|nospeech|> (same ids).
bool same_special(std::string_view ours, std::string_view theirs) {
  return ours == theirs || (ours == "<|he|>" && theirs == "<|iw|>") ||
         (ours == "<|nospeech|>" && theirs == "<|nocaptions|>");
}

}  // namespace

void WhisperTokenizer::init_specials(bool multilingual, int n_vocab, int32_t first_special,
                                     const std::string& name) {
  num_languages_ = n_vocab - first_special - kFixedSpecials - kTimestamps;
  if (num_languages_ != 99 && num_languages_ != 100)
    fail(name, "n_vocab " + std::to_string(n_vocab) + " does not fit " +
                   std::to_string(first_special) + " ranks + specials (expected " +
                   std::to_string(first_special + kFixedSpecials + kTimestamps + 99) + " or " +
                   std::to_string(first_special + kFixedSpecials + kTimestamps + 100) + ")");
  multilingual_ = multilingual;
  n_vocab_ = n_vocab;
  eot_ = first_special;
  translate_ = eot_ + 2 + num_languages_;
}

std::string WhisperTokenizer::special_text(int32_t id) const {
  static constexpr std::array<std::string_view, 6> kAfterLanguages = {
      "<|translate|>",   "<|transcribe|>", "<|startoflm|>",
      "<|startofprev|>", "<|nospeech|>",   "<|notimestamps|>"};
  if (id == eot_) return "<|endoftext|>";
  if (id == eot_ + 1) return "<|startoftranscript|>";
  if (id < translate_) return "<|" + std::string(kLanguages[id - eot_ - 2]) + "|>";
  if (id < timestamp_begin()) return std::string(kAfterLanguages[id - translate_]);
  char buf[32];
  std::snprintf(buf, sizeof(buf), "<|%.2f|>", (id - timestamp_begin()) * 0.02);
  return buf;
}

WhisperTokenizer WhisperTokenizer::from_tiktoken(const std::string& ranks_path, bool multilingual,
                                                 int n_vocab) {
  std::vector<std::string> ranks = load_tiktoken_ranks(ranks_path);
  WhisperTokenizer t;
  t.init_specials(multilingual, n_vocab, int32_t(ranks.size()), ranks_path);
  t.bpe_ = std::make_shared<BpeTokenizer>(
      BpeTokenizer::from_ranks(std::move(ranks), std::string(kGpt2Pattern), ranks_path));
  return t;
}

WhisperTokenizer WhisperTokenizer::from_ggml_vocab(std::span<const std::string> vocab,
                                                   bool multilingual, int n_vocab,
                                                   const std::string& name) {
  auto eot = std::find(vocab.begin(), vocab.end(), std::string("<|endoftext|>"));
  std::vector<std::string> ranks(vocab.begin(), eot);
  WhisperTokenizer t;
  t.init_specials(multilingual, n_vocab, int32_t(ranks.size()), name);
  t.bpe_ = std::make_shared<BpeTokenizer>(bpe_from_ggml_vocab(ranks, name));
  return t;
}

WhisperTokenizer WhisperTokenizer::from_hf_json(const std::string& tokenizer_json_path,
                                                int n_vocab) {
  HfTokenizer hf = load_hf_tokenizer_json(tokenizer_json_path);
  int32_t eot = hf.bpe.special_id("<|endoftext|>");
  if (eot < 0) fail(tokenizer_json_path, "no <|endoftext|> added token");
  WhisperTokenizer t;
  // Every Whisper vocabulary lists all language tokens; English-only models differ by
  // their BPE (gpt2, 50256 ranks, vs multilingual, 50257), told apart by eot's id.
  t.init_specials(eot != 50256, n_vocab, eot, tokenizer_json_path);
  // Every added token that names a Whisper special must sit at the id the layout gives.
  for (int32_t id = eot; id < t.timestamp_begin(); ++id) {
    std::string text = t.special_text(id);
    int32_t got = hf.bpe.special_id(text);
    if (got >= 0 && got != id)
      fail(tokenizer_json_path, "added token " + text + " has id " + std::to_string(got) +
                                    ", expected " + std::to_string(id));
  }
  for (const HfAddedToken& a : hf.added_tokens) {
    if (a.id < eot) fail(tokenizer_json_path, "added token " + a.content + " inside the BPE ids");
    if (a.id >= n_vocab || !same_special(t.special_text(a.id), a.content))
      fail(tokenizer_json_path, "added token " + a.content + " with id " + std::to_string(a.id) +
                                    " is not Whisper's special at that id");
  }
  for (int32_t id = eot + 1; id < hf.bpe.id_end(); ++id)
    if (hf.bpe.has_id(id) && hf.bpe.special_id(hf.bpe.token_bytes(id)) != id)
      fail(tokenizer_json_path, "vocab id " + std::to_string(id) + " is past <|endoftext|>");
  t.bpe_ = std::make_shared<BpeTokenizer>(std::move(hf.bpe));
  return t;
}

std::vector<int32_t> WhisperTokenizer::encode(std::string_view text) const {
  return bpe_->encode(text);
}

std::string WhisperTokenizer::token_bytes(int32_t id) const {
  if (id < 0 || id >= n_vocab_)
    fail(bpe_->name(), "token id " + std::to_string(id) + " out of range");
  return id >= eot_ ? special_text(id) : bpe_->token_bytes(id);
}

std::string WhisperTokenizer::decode(std::span<const int32_t> ids) const {
  std::string out;
  for (int32_t id : ids) {
    std::string bytes = token_bytes(id);  // throws for ids outside the vocabulary
    if (id < eot_) out += bytes;
  }
  return out;
}

std::string WhisperTokenizer::decode_with_timestamps(std::span<const int32_t> ids) const {
  std::string out;
  for (int32_t id : ids) out += token_bytes(id);
  return out;
}

int32_t WhisperTokenizer::language_token(std::string_view code) const {
  for (int i = 0; i < num_languages_; ++i)
    if (kLanguages[i] == code) return eot_ + 2 + i;
  throw Error(ErrorKind::invalid_argument,
              "[tokenizer] unknown language code \"" + std::string(code) + "\"");
}

std::vector<std::string> WhisperTokenizer::language_codes() const {
  return {kLanguages.begin(), kLanguages.begin() + num_languages_};
}

std::string WhisperTokenizer::language_of_token(int32_t id) const {
  int i = id - eot_ - 2;
  return i >= 0 && i < num_languages_ ? std::string(kLanguages[i]) : std::string();
}

std::vector<int32_t> WhisperTokenizer::sot_sequence(std::optional<std::string> language,
                                                    std::string_view task) const {
  if (task != "transcribe" && task != "translate")
    throw Error(
        ErrorKind::invalid_argument,
        "[tokenizer] task must be transcribe or translate, got \"" + std::string(task) + "\"");
  std::vector<int32_t> seq = {sot()};
  // English-only models take neither (whisper's get_tokenizer sets both to None).
  if (!multilingual_) return seq;
  if (language) seq.push_back(language_token(*language));
  seq.push_back(task == "translate" ? translate() : transcribe());
  return seq;
}

const std::vector<int32_t>& WhisperTokenizer::non_speech_tokens() const {
  std::call_once(non_speech_->once, [this] { non_speech_->ids = compute_non_speech_tokens(); });
  return non_speech_->ids;
}

std::vector<int32_t> WhisperTokenizer::compute_non_speech_tokens() const {
  // whisper/tokenizer.py Tokenizer.non_speech_tokens, step for step.
  std::vector<std::string> symbols;
  for (char c : std::string_view("\"#()*+/:;<=>@[\\]^_`{|}~")) symbols.emplace_back(1, c);
  for (const char* s :
       {"「", "」",  "『", "』", "<<",  ">>",  "<<<", ">>>", "--", "---", "-(", "-[",
        "('", "(\"", "((", "))", "(((", ")))", "[[",  "]]",  "{{", "}}",  "♪♪", "♪♪♪"})
    symbols.emplace_back(s);
  // U+2640..U+267F symbols: when split, their first token (shared UTF-8 lead bytes) is
  // suppressed anyway.
  const std::vector<std::string> miscellaneous = {"♩", "♪", "♫", "♬", "♭", "♮", "♯"};
  std::set<int32_t> result = {encode(" -")[0], encode(" '")[0]};
  auto add = [&](const std::string& symbol, bool misc) {
    for (const std::string& text : {symbol, " " + symbol}) {
      std::vector<int32_t> ids = encode(text);
      if (ids.size() == 1 || misc) result.insert(ids[0]);
    }
  };
  for (const std::string& s : symbols) add(s, false);
  for (const std::string& s : miscellaneous) add(s, true);
  return {result.begin(), result.end()};
}

}  // namespace parley

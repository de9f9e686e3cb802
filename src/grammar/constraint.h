// A per-choice constraint on generated tokens (the grammar engine's interface to sampling):
// before each draw it masks the logits of tokens that cannot continue a valid answer, and
// after each accepted token it advances. The answer must be in the language of a
// ByteAutomaton: a regular expression (grammar/regex.h) or a grammar (grammar/grammar.h:
// GBNF, JSON Schema, json_object). A token is allowed when its bytes keep the automaton
// alive; the stop tokens are allowed when the answer so far is complete; when nothing else
// can follow, only they remain.
//
// A mask is computed once per automaton state, by walking the vocabulary's byte trie
// (TokenTrie) from that state: a subtree whose prefix dies is skipped whole, so the cost is
// the number of trie nodes still alive, and the automaton's transitions are cached.
#pragma once

#include <array>
#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "grammar/automaton.h"

namespace parley {

// What a request constrains its answer to.
struct GrammarSpec {
  enum class Kind { none, regex, gbnf, json_schema, json_object };
  Kind kind = Kind::none;
  std::string text;            // the pattern, the GBNF, or the schema's JSON text
  std::string start = "root";  // gbnf: the start rule
  explicit operator bool() const { return kind != Kind::none; }
};

// Compiles a spec (each call a fresh automaton: they fill their states as they run). Throws
// Error(invalid_argument) naming what it cannot compile.
std::shared_ptr<ByteAutomaton> compile_grammar(const GrammarSpec& spec);

// The vocabulary's token bytes as a trie, in preorder, walked through an automaton's cached
// transitions. The "text slice" is precomputed, by length: the tokens that are whole UTF-8
// characters other than '"', '\\', U+0000-U+001F and U+007F (ordinary text, 96% of Qwen3's
// vocabulary), as one bitset per number of characters. When every such character leads
// from the state to one same state, and so on along that chain (inside a JSON string, with
// or without a length bound; a free-text loop), a slice token of n characters is allowed
// exactly when the chain's n-th state is alive: those bits are ORed in without a walk, and
// only the other tokens are walked.
class TokenTrie {
 public:
  // token_bytes[id]: the bytes token id adds to the text (empty: never allowed, e.g. special
  // tokens and padded ids).
  explicit TokenTrie(std::shared_ptr<const std::vector<std::string>> token_bytes);
  size_t vocab() const { return bytes_->size(); }
  const std::string& bytes(int32_t id) const { return (*bytes_)[size_t(id)]; }
  // Sets bit id of `bits` (vocab() bits in 32-bit words, cleared by the caller) for every
  // token whose bytes keep `a` alive from state s.
  void allowed(ByteAutomaton& a, int32_t s, std::span<uint32_t> bits) const;
  // The state every character of the text slice leads to from s (kDead when all die), or
  // kUnknown when they do not all lead to one state.
  static int32_t text_successor(ByteAutomaton& a, int32_t s);

 private:
  struct Trie {
    // Node k: its byte, depth (1 for a token's first byte), the node after its subtree, and
    // the tokens that end there (ids[first[k] .. first[k + 1])).
    std::vector<uint8_t> byte;
    std::vector<int32_t> depth, skip, first, ids;
    size_t max_depth = 0;
    void build(const std::vector<std::string>& bytes, std::vector<int32_t> order);
    void walk(ByteAutomaton& a, int32_t s, std::span<uint32_t> bits) const;
  };
  std::shared_ptr<const std::vector<std::string>> bytes_;
  Trie all_, rest_;                           // every token; the tokens outside the text slice
  std::vector<std::vector<uint32_t>> slice_;  // the text slice's bits by characters (0 unused)
};

class TokenConstraint {
 public:
  TokenConstraint(std::shared_ptr<ByteAutomaton> automaton, std::shared_ptr<const TokenTrie> trie,
                  std::vector<int32_t> stop_tokens);

  // logits[id] = -inf for every disallowed id. Throws Error(invalid_argument) when no
  // token can continue (the grammar needs bytes no token has).
  void mask(std::span<float> logits);
  // The allowed ids as bits (vocab() bits in 32-bit words; stop tokens included when the
  // answer is complete).
  const std::vector<uint32_t>& allowed();
  bool allows(int32_t token);
  void accept(int32_t token);  // advance (a stop token ends it)
  bool complete();             // the text so far is complete
  // The bytes the grammar forces next (a key after its object's `{`, the `": ` after it),
  // up to `max` bytes, stopping at a real choice or where the text may end. Optional
  // whitespace is not a choice here: where the only other way on is one byte, the
  // answer's own spacing decides (a space after that same byte earlier in the answer, else
  // after ',' and ':' only, as json.dumps writes). A proposal for the verifier, which keeps
  // whatever the model would have written. `final`: nothing at all can follow the bytes.
  std::string forced_bytes(size_t max, bool* final = nullptr);
  // The automaton's state, to look ahead (verifying drafts) and come back.
  int32_t state() const { return state_; }
  void set_state(int32_t s) { state_ = s; }

 private:
  std::shared_ptr<ByteAutomaton> a_;
  std::shared_ptr<const TokenTrie> trie_;
  std::vector<int32_t> stops_;
  int32_t state_;
  std::string tail_;  // the text's last bytes, for errors
  // spacing_[b]: whether the answer put whitespace after byte b the last time (-1: not yet).
  std::array<int8_t, 256> spacing_;
  std::unordered_map<int32_t, std::vector<uint32_t>> masks_;  // per automaton state
};

}  // namespace parley

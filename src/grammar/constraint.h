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
// transitions. The "text slice" is precomputed: the tokens that are whole UTF-8 characters
// other than '"', '\\', U+0000-U+001F and U+007F, at most 16 of them (ordinary text, 95% of
// Qwen3's vocabulary), as bitsets by number of characters, by first byte and by the
// characters they hold after their first, and as lists of where each character first occurs
// after a token's first. A state's text characters split three ways (a Partition): to one
// state (the most common live one), to nothing (dead), and elsewhere (other). From a state
// where the first character leads to one state T but for a few others, and each step on
// from T splits the characters the same way (inside a JSON string, bounded or not, with a
// pattern or a format; a key being written beside declared ones; free text), a slice token
// of n characters whose first leads to T and whose later characters all lead on is allowed
// exactly when the state n - 1 steps after T is alive: those bits are set from the bitsets
// without a walk. Tokens with a later character that leads elsewhere are stepped one by
// one from T; tokens that start with another character, and those outside the slice, are
// walked. Other states walk the whole trie (with a Memo of subtrees).
class TokenTrie {
 public:
  // token_bytes[id]: the bytes token id adds to the text (empty: never allowed, e.g. special
  // tokens and padded ids).
  explicit TokenTrie(std::shared_ptr<const std::vector<std::string>> token_bytes);
  size_t vocab() const { return bytes_->size(); }
  const std::string& bytes(int32_t id) const { return (*bytes_)[size_t(id)]; }
  // How the text characters leave a state: ASCII ones by code (bits of 2 words), the
  // multi-byte ones as a whole.
  struct Partition {
    enum class Way : uint8_t { next, dead, other };
    int32_t next = ByteAutomaton::kDead;      // the live state most ASCII characters lead to
    std::array<uint64_t, 2> dead{}, other{};  // ASCII characters to kDead / elsewhere
    Way multibyte = Way::dead;                // where every multi-byte character leads
  };
  static Partition partition(ByteAutomaton& a, int32_t s);
  // What one automaton's walks learn for the next ones: the allowed tokens of each
  // first-byte subtree by the state its first byte leads to (states converge after one
  // byte: an additional key being written, a pattern string), so a walk from a new state
  // reuses every subtree whose first byte leads where an earlier walk's did; and each
  // state's Partition and transition table.
  struct Memo {
    std::unordered_map<uint64_t, std::vector<int32_t>> subtrees;
    size_t ids = 0;  // ids held (the memo starts over past kMaxMemoIds)
    std::unordered_map<int32_t, Partition> partitions;  // by state
    std::vector<const int32_t*> tables;                 // a.transitions(s) by state s
  };
  // Sets bit id of `bits` (vocab() bits in 32-bit words, cleared by the caller) for every
  // token whose bytes keep `a` alive from state s. memo: a's (null: none).
  void allowed(ByteAutomaton& a, int32_t s, std::span<uint32_t> bits, Memo* memo = nullptr) const;
  // Whether every multi-byte character leads from s to `to`.
  static bool multibyte_to(ByteAutomaton& a, int32_t s, int32_t to);

 private:
  // An automaton's transition tables, each fetched once (a virtual call) when a memo keeps
  // them: a walk reads one per trie node that has children.
  struct Tables {
    ByteAutomaton& a;
    std::vector<const int32_t*>* cache;
    const int32_t* operator()(int32_t s) {
      if (cache && size_t(s) < cache->size() && (*cache)[size_t(s)]) return (*cache)[size_t(s)];
      return fetch(s);
    }
    const int32_t* fetch(int32_t s);
  };
  struct Trie {
    // Node k: its byte, depth (1 for a token's first byte), the node after its subtree
    // (k + 1 when it has no children), and the tokens that end there
    // (ids[first[k] .. first[k + 1])).
    struct Node {
      uint8_t byte;
      uint16_t depth;
      int32_t skip;
    };
    std::vector<Node> nodes;
    std::vector<int32_t> first, ids;
    size_t max_depth = 0;
    void build(const std::vector<std::string>& bytes, std::vector<int32_t> order);
    void walk(Tables& tables, int32_t s, std::span<uint32_t> bits, Memo* memo) const;
    // emit(id) for the tokens of the sibling subtrees [begin, end) (at one depth) that keep
    // the automaton alive from state s, the state before their first byte.
    template <class Emit>
    void walk_range(Tables& tables, int32_t begin, int32_t end, int32_t s, Emit emit) const;
    // walk's tokens whose first byte b has first[b] == want.
    void walk_first(Tables& tables, int32_t s, std::span<uint32_t> bits,
                    const std::array<bool, 256>& first, bool want) const;
  };
  static constexpr size_t kMultibyte = 128;  // the index of the multi-byte characters
  // The slice path of allowed(): false (bits untouched) when s does not fit it.
  bool allowed_slice(ByteAutomaton& a, Tables& tables, int32_t s, std::span<uint32_t> bits,
                     Memo* memo) const;
  std::shared_ptr<const std::vector<std::string>> bytes_;
  Trie all_, rest_;  // every token; the tokens outside the text slice
  // The text slice's bits: slice_[n] holds its tokens of 1..n characters (0 unused).
  std::vector<std::vector<uint32_t>> slice_;
  std::array<std::vector<uint32_t>, 256> slice_first_;  // the text slice by first byte
  std::vector<uint32_t> slice_first_multibyte_;         // ... whose first is multi-byte
  // The same as lists by ASCII first byte (and kMultibyte).
  std::array<std::vector<int32_t>, kMultibyte + 1> slice_first_ids_;
  // By ASCII character (and kMultibyte): the slice tokens that hold it after their first
  // character, as bits and as a list by id with where it first occurs (in characters, 1..15).
  std::array<std::vector<uint32_t>, kMultibyte + 1> holding_;
  std::array<std::vector<int32_t>, kMultibyte + 1> holding_ids_;
  std::array<std::vector<uint8_t>, kMultibyte + 1> holding_at_;
  // By slice token: the ASCII characters it holds after its first (bit 0: a multi-byte one).
  std::vector<std::array<uint64_t, 2>> later_;
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
  // Where the answer stands (the automaton's state and the text's tail that spacing and
  // errors read), to look ahead while verifying drafts and come back exactly.
  struct Mark {
    int32_t state;
    std::string tail;
    std::array<int8_t, 256> spacing;
  };
  Mark mark() const { return {state_, tail_, spacing_}; }
  void rewind(const Mark& m) {
    state_ = m.state;
    tail_ = m.tail;
    spacing_ = m.spacing;
  }

 private:
  std::shared_ptr<ByteAutomaton> a_;
  std::shared_ptr<const TokenTrie> trie_;
  std::vector<int32_t> stops_;
  int32_t state_;
  std::string tail_;  // the text's last bytes, for errors
  // spacing_[b]: whether the answer put whitespace after byte b the last time (-1: not yet).
  std::array<int8_t, 256> spacing_;
  std::unordered_map<int32_t, std::vector<uint32_t>> masks_;  // per automaton state
  TokenTrie::Memo memo_;
};

}  // namespace parley

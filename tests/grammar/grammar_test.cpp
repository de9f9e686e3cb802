// The grammar engine's context-free grammars (grammar/grammar.h, GBNF): full matches of
// hand-checked grammars and texts, UTF-8 classes against every code point's encoding,
// errors naming the line and column, left recursion refused, and token masks over a small
// vocabulary walked through the trie (grammar/constraint.h) equal to stepping each token.
#include <gtest/gtest.h>

#include <cmath>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "engine/error.h"
#include "grammar/constraint.h"
#include "grammar/grammar.h"
#include "grammar/regex.h"
#include "io/json_lite.h"

namespace parley {
namespace {

struct Case {
  const char* text;
  bool match;
};

void expect_matches(const std::string& gbnf, const std::vector<Case>& cases) {
  auto g = Grammar::compile_gbnf(gbnf);
  for (const Case& c : cases)
    EXPECT_EQ(g->full_match(c.text), c.match) << "grammar:\n" << gbnf << "\ntext: " << c.text;
}

TEST(Grammar, LiteralsAlternativesAndGroups) {
  expect_matches(R"g(root ::= "yes" | "no" | "maybe" ("!" | "?"))g", {{"yes", true},
                                                                      {"no", true},
                                                                      {"maybe!", true},
                                                                      {"maybe?", true},
                                                                      {"maybe", false},
                                                                      {"ye", false},
                                                                      {"yess", false},
                                                                      {"", false}});
}

TEST(Grammar, RepetitionOperators) {
  expect_matches(R"g(root ::= "a"* "b"+ "c"? "d"{2} "e"{1,} "f"{0,2} "g"{1,3})g",
                 {{"bddeg", true},
                  {"aaabbbcddeeeffggg", true},
                  {"bcddeffg", true},
                  {"ddeg", false},       // b+ needs one
                  {"bdeg", false},       // d{2}
                  {"bddg", false},       // e{1,}
                  {"bddefffg", false},   // f{0,2}
                  {"bddegggg", false},   // g{1,3}
                  {"bdddeg", false},     //
                  {"bccddeg", false}});  // c?
  expect_matches(R"g(root ::= ("ab" | "c"){2,3} x{0}
x ::= "never")g",
                 {{"abc", true}, {"cab", true}, {"ccc", true}, {"c", false}, {"abcabc", false}});
}

TEST(Grammar, RecursionAndRuleReferences) {
  // Balanced parentheses (recursion in the middle of an alternative: a real stack).
  const std::string paren = R"g(
root  ::= group*
group ::= "(" root ")" | "[" root "]"
)g";
  expect_matches(paren, {{"", true},
                         {"()", true},
                         {"(()[])", true},
                         {"([()()])[]", true},
                         {"(", false},
                         {"(]", false},
                         {"([)]", false},
                         {"())", false}});
  // A JSON-ish list of numbers, rules used before they are defined, comments, a rule over
  // several lines.
  expect_matches(R"g(# numbers
root ::= "[" ws ( num ( ws "," ws num )* )? ws "]"   # a list
num  ::= "-"? ( "0" | [1-9] [0-9]* )
         ( "." [0-9]+ )?
ws   ::= [ \t\n]*
)g",
                 {{"[]", true},
                  {"[ 1, -2.5 ,30 ]", true},
                  {"[\n0\n]", true},
                  {"[01]", false},
                  {"[1,]", false},
                  {"[1.]", false},
                  {"[ 1 2 ]", false}});
}

TEST(Grammar, ClassesEscapesAndAnyCharacter) {
  expect_matches(R"g(root ::= [a-c_] [^a-z\n] "\x41\u00e9\"\\" . "\t")g",
                 {{"a0Aé\"\\z\t", true},
                  {"_ZAé\"\\é\t", true},
                  {"c!Aé\"\\\xf0\x9f\x98\x80\t", true},  // . is any one character (U+1F600)
                  {"dZAé\"\\z\t", false},
                  {"azAé\"\\z\t", false},
                  {"a\nAé\"\\z\t", false},
                  {"a0Ae\"\\z\t", false},
                  {"a0Aé\"\\zz\t", false}});
}

// Every code point's UTF-8 encoding against a class over code points, in and out of it, and
// invalid sequences (surrogates, overlong forms, past U+10FFFF) never.
TEST(Grammar, Utf8ClassesMatchExactlyTheirCodePoints) {
  auto g = Grammar::compile_gbnf(R"g(root ::= [a\u00e0-\u00ff\u0800-\u0fff\U0001F600-\U0001F64F]
)g");
  auto neg = Grammar::compile_gbnf("root ::= [^\\u0000-\\u007f\\u4e00]");
  auto in = [](uint32_t cp) {
    return cp == 'a' || (cp >= 0xE0 && cp <= 0xFF) || (cp >= 0x800 && cp <= 0xFFF) ||
           (cp >= 0x1F600 && cp <= 0x1F64F);
  };
  for (uint32_t cp = 0; cp <= 0x10FFFF; cp += (cp < 0x20000 ? 1 : 97)) {
    if (cp >= 0xD800 && cp <= 0xDFFF) continue;
    std::string s;
    io::json::append_utf8(s, cp);
    ASSERT_EQ(g->full_match(s), in(cp)) << std::hex << cp;
    ASSERT_EQ(neg->full_match(s), cp >= 0x80 && cp != 0x4E00) << std::hex << cp;
  }
  for (const char* bad : {"\xed\xa0\x80", "\xc0\x80", "\xe0\x80\x80", "\xf4\x90\x80\x80",
                          "\xf5\x80\x80\x80", "\x80", "\xc3"})
    EXPECT_FALSE(neg->full_match(bad)) << "invalid UTF-8 accepted";
}

TEST(Grammar, ErrorsNameTheLineAndColumn) {
  auto message = [](const std::string& gbnf) {
    try {
      Grammar::compile_gbnf(gbnf);
    } catch (const Error& e) {
      return std::string(e.what());
    }
    return std::string("(compiled)");
  };
  EXPECT_NE(message("root ::= \"a\" x\n").find("undefined rule 'x'"), std::string::npos);
  EXPECT_NE(message("root ::= \"a\n").find("unterminated literal"), std::string::npos);
  EXPECT_NE(message("root ::= [a-\n").find("line 1"), std::string::npos);
  EXPECT_NE(message("x ::= \"a\"\n").find("no 'root' rule"), std::string::npos);
  EXPECT_NE(message("root ::= \"a\"\nroot ::= \"b\"\n").find("defined twice"), std::string::npos);
  EXPECT_NE(message("root ::= \"a\"\n  \"b\" ) \n").find("line 2, column 7"), std::string::npos);
  EXPECT_NE(message("root ::= \"a\"{3,1}").find("n < m"), std::string::npos);
  EXPECT_NE(message("root ::= \"\\q\"").find("unknown escape"), std::string::npos);
  // Left recursion, direct and through a nullable prefix and another rule.
  EXPECT_NE(message("root ::= root \"a\" | \"b\"").find("left recursion in rule 'root'"),
            std::string::npos);
  EXPECT_NE(message("root ::= x \"a\"\nx ::= \"b\"? y\ny ::= root | \"c\"").find("left recursion"),
            std::string::npos);
  // A rule that ends with itself is not left recursion (a loop, not a growing stack).
  EXPECT_EQ(message("root ::= \"a\"? root | \"b\""), "(compiled)");
}

TEST(Grammar, StatesAreSharedSoRepetitionDoesNotGrow) {
  auto g = Grammar::compile_gbnf(R"g(root ::= "[" item ("," item)* "]"
item ::= [a-z]+)g");
  std::string text = "[a";
  for (int i = 0; i < 500; ++i) text += ",abc";
  text += "]";
  EXPECT_TRUE(g->full_match(text));
  EXPECT_LT(g->states(), 12u);  // the loop revisits the same few states
}

// The trie walk's masks equal stepping each token's bytes alone, over random token sets
// and states reached along random valid texts.
TEST(TokenConstraint, TrieMasksEqualStepByStepMasks) {
  const std::string gbnf = R"g(
root ::= "{" ws pair ( ws "," ws pair )* ws "}"
pair ::= str ws ":" ws ( str | num | root )
str  ::= "\"" [^"\\]* "\""
num  ::= "-"? [0-9]+
ws   ::= [ \n]?
)g";
  std::mt19937 rng(7);
  const std::string alphabet = "{}\":,- \n0123456789abxé\\aaabbbxxx";
  std::vector<std::string> vocab;
  for (int i = 0; i < 600; ++i) {
    std::string t;
    const int len = 1 + int(rng() % 4);
    for (int k = 0; k < len; ++k) t += alphabet[rng() % alphabet.size()];
    vocab.push_back(t);
  }
  vocab.push_back("");  // special
  auto bytes = std::make_shared<const std::vector<std::string>>(vocab);
  auto trie = std::make_shared<const TokenTrie>(bytes);
  // The same grammar with strings of at most 5 characters: the text slice's chain of states,
  // bounded.
  std::string bounded = gbnf;
  bounded.replace(bounded.find("[^\"\\\\]*"), 7, "[^\"\\\\]{0,5}");
  // And with strings whose first character 'x' leads elsewhere than the others (at most 3
  // more after it): the slice less the tokens that start with an exception.
  std::string excepted = gbnf;
  excepted.replace(excepted.find("[^\"\\\\]*"), 7,
                   "( \"x\" [^\"\\\\]{0,3} | [^\"\\\\x] [^\"\\\\]* )?");
  size_t nonempty_masks = 0;
  for (const std::string text :
       {"{\"a\": 12, \"b\":{\"x\":\"é\"}}", "{\"ab\" :-3}", "{\"bxx\": \"a bé1\"}"})
    for (const std::string& grammar : {gbnf, bounded, excepted}) {
      auto g = Grammar::compile_gbnf(grammar);
      ASSERT_TRUE(g->full_match(text));
      for (size_t i = 0; i <= text.size(); ++i) {
        const int32_t s = g->step(g->start(), text.substr(0, i));
        ASSERT_NE(s, ByteAutomaton::kDead);
        std::vector<uint32_t> bits((vocab.size() + 31) / 32, 0);
        trie->allowed(*g, s, bits);
        for (int32_t id = 0; id < int32_t(vocab.size()); ++id) {
          const std::string& t = vocab[size_t(id)];
          const bool want = !t.empty() && g->step(s, t) != ByteAutomaton::kDead;
          ASSERT_EQ(bool((bits[size_t(id) / 32] >> (id % 32)) & 1), want)
              << "token '" << t << "' after '" << text.substr(0, i) << "'";
          nonempty_masks += want;
        }
      }
    }
  EXPECT_GT(nonempty_masks, 100u);  // the vocabulary is not all dead ends
}

// The text slice's bitsets, lists and stepping (constraint.h) against stepping each token:
// string contents whose later characters split into ones leading on, dead ones ('/', the
// email's punctuation), ones leading elsewhere ('.' and '@', an unanchored pattern's 'a') and
// multi-byte ones of each kind, bounded (the chain ends) or not, and keys of a character
// class, over a vocabulary large enough that the common characters' sets go as bits (over
// 1000 ids) and the rare ones as lists.
TEST(TokenConstraint, SliceMasksEqualStepByStepMasks) {
  std::mt19937 rng(11);
  const std::vector<std::string> alphabet = {"a", "a", "a",  "b",  "b", "c", "e", "x", "z",  "k",
                                             "q", "0", "1",  "9",  ".", "@", "/", "-", "_",  ":",
                                             " ", " ", "\"", "\\", "{", "}", ",", "é", "中", "\n"};
  std::vector<std::string> vocab;
  for (int i = 0; i < 9000; ++i) {
    std::string t;
    const int len = 1 + int(rng() % 8);
    for (int k = 0; k < len; ++k) t += alphabet[rng() % alphabet.size()];
    vocab.push_back(t);
  }
  for (const char* t : {"a", "b", "é", "中", "\"", "@", ".", "/", " ", "aaaaaaaaaaaaaaaaaaaa"})
    vocab.push_back(t);  // every single character, and a token beyond the slice's 16
  auto trie =
      std::make_shared<const TokenTrie>(std::make_shared<const std::vector<std::string>>(vocab));
  struct Case {
    const char* gbnf;
    std::vector<std::string> texts;
  };
  const std::vector<Case> cases = {
      {R"g(root ::= "\"" [a-z0-9]+ ("." [a-z0-9]+)* "@" [a-z]+ ("." [a-z]+)* "\"")g",
       {"\"ab.c9@xz.q\""}},
      {R"g(root ::= "\"" [^/"\\]+ "\"")g", {"\"a b中é-:x\""}},
      {R"g(root ::= "\"" [^"\\]* "a" "b"+ "c" [^"\\]* "\"")g", {"\"x aabbbc中z\""}},
      {R"g(root ::= "\"" [a-z ]{0,5} "\"" | "\"" ( [a-z]{3} "-" ){0,2} [a-z]{2} "\"")g",
       {"\"ab c\"", "\"abc-xyz-ab\""}},
      {R"g(root ::= "\"" ( [a-z] | "é" )+ "\"")g", {"\"aéb\""}},
      {R"g(root ::= "{" ( "\"" [a-z0-9_:]+ "\":" [0-9]+ ","? )* "}")g", {"{\"a_1:b\":12,\"k\":0}"}},
      {R"g(root ::= [^"\\\x7F\x00-\x1F]* "\"")g", {"é x中\""}},
  };
  size_t checked = 0;
  for (const Case& c : cases) {
    auto g = Grammar::compile_gbnf(c.gbnf);
    TokenTrie::Memo memo;
    for (const std::string& text : c.texts) {
      ASSERT_TRUE(g->full_match(text)) << c.gbnf << "\n" << text;
      for (size_t i = 0; i < text.size(); ++i) {
        const int32_t s = g->step(g->start(), text.substr(0, i));
        ASSERT_NE(s, ByteAutomaton::kDead);
        for (TokenTrie::Memo* m : {static_cast<TokenTrie::Memo*>(nullptr), &memo}) {
          std::vector<uint32_t> bits((vocab.size() + 31) / 32, 0);
          trie->allowed(*g, s, bits, m);
          for (int32_t id = 0; id < int32_t(vocab.size()); ++id) {
            const bool want = g->step(s, vocab[size_t(id)]) != ByteAutomaton::kDead;
            ASSERT_EQ(bool((bits[size_t(id) / 32] >> (id % 32)) & 1), want)
                << c.gbnf << "\ntoken '" << vocab[size_t(id)] << "' after '" << text.substr(0, i)
                << "'";
            checked += want;
          }
        }
      }
    }
  }
  EXPECT_GT(checked, 50000u);  // many tokens allowed, not only dead ends
}

TEST(TokenConstraint, GrammarMasksAndStops) {
  // 0 "{", 1 "}", 2 "\"a\"", 3 ":", 4 "1", 5 "12}", 6 "" (special), 7 stop, 8 " ".
  auto trie = std::make_shared<const TokenTrie>(std::make_shared<const std::vector<std::string>>(
      std::vector<std::string>{"{", "}", "\"a\"", ":", "1", "12}", "", "", " "}));
  TokenConstraint c(Grammar::compile_gbnf(R"g(root ::= "{" ( "\"a\"" ":" [0-9]+ )? "}")g"), trie,
                    {7});
  const auto allowed = [&] {
    std::vector<float> logits(9, 0.0f);
    c.mask(logits);
    std::vector<int> ids;
    for (int i = 0; i < 9; ++i)
      if (std::isfinite(logits[size_t(i)])) ids.push_back(i);
    return ids;
  };
  EXPECT_EQ(allowed(), (std::vector<int>{0}));
  c.accept(0);
  EXPECT_EQ(allowed(), (std::vector<int>{1, 2}));
  c.accept(2);
  EXPECT_EQ(allowed(), (std::vector<int>{3}));
  c.accept(3);
  EXPECT_EQ(allowed(), (std::vector<int>{4, 5}));
  c.accept(5);
  EXPECT_TRUE(c.complete());
  EXPECT_EQ(allowed(), (std::vector<int>{7}));
  EXPECT_TRUE(c.allows(7));
  EXPECT_FALSE(c.allows(1));
}

// The verifier looks ahead over drafts and comes back: mark/rewind restore the text's tail
// and spacing too (the next forced bytes follow the answer's own spacing), not just the
// state; a constraint that never looked ahead is the same.
TEST(TokenConstraint, RewindComesBackExactly) {
  auto trie = std::make_shared<const TokenTrie>(std::make_shared<const std::vector<std::string>>(
      std::vector<std::string>{"{", "\"a\"", ":", " ", "1", ",", "\"b\"", "2", "}"}));
  const char* g = R"g(root ::= "{" "\"a\"" ws ":" ws "1" ws "," ws "\"b\"" ws ":" ws "2" "}"
ws ::= " "?)g";
  TokenConstraint c(Grammar::compile_gbnf(g), trie, {}), d(Grammar::compile_gbnf(g), trie, {});
  for (int t : {0, 1, 2}) {
    c.accept(t);
    d.accept(t);
  }
  const TokenConstraint::Mark m = c.mark();
  for (int t : {3, 4, 3, 5, 3}) c.accept(t);  // `{"a": 1 , ` looked ahead
  EXPECT_NE(c.mark().tail, m.tail);
  c.rewind(m);
  EXPECT_EQ(c.mark().state, d.mark().state);
  EXPECT_EQ(c.mark().tail, d.mark().tail);
  EXPECT_EQ(c.mark().spacing, d.mark().spacing);
  for (int t : {4, 5}) {  // the answer goes on without spaces: `1,`
    c.accept(t);
    d.accept(t);
  }
  EXPECT_EQ(c.forced_bytes(64), d.forced_bytes(64));
  // No space after ':' as the answer wrote `"a":1` (the look-ahead's `: ` is forgotten);
  // after ',' a space, as json.dumps writes, since the answer has not shown its own yet.
  EXPECT_EQ(c.forced_bytes(64), " \"b\":2}");
}

}  // namespace
}  // namespace parley

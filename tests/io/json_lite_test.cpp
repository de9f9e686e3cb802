// json_lite: the strict JSON parser behind the safetensors header.
#include "io/json_lite.h"

#include "io_test_util.h"

namespace parley::io {
namespace {

using testing::expect_error;
using K = json::Value::Kind;

json::Value parse(std::string_view s) { return json::parse(s, "[test] x"); }

TEST(JsonLite, ParsesNestedValues) {
  const auto v = parse(R"( {"a": [1, -2.5e3, true, false, null, {"b": "c"}], "d": {}} )");
  ASSERT_TRUE(v.is(K::object));
  const auto& a = v.find("a")->as_array();
  ASSERT_EQ(a.size(), 6u);
  EXPECT_EQ(a[0].as_uint64(), 1u);
  EXPECT_DOUBLE_EQ(a[1].as_double(), -2500.0);
  EXPECT_EQ(a[1].as_int64(), std::nullopt);  // has an exponent
  EXPECT_TRUE(a[2].as_bool());
  EXPECT_FALSE(a[3].as_bool());
  EXPECT_TRUE(a[4].is(K::null));
  EXPECT_EQ(a[5].find("b")->as_string(), "c");
  EXPECT_TRUE(v.find("d")->as_object().empty());
  EXPECT_EQ(v.find("zzz"), nullptr);
}

TEST(JsonLite, KeepsLargeIntegersExact) {
  const auto v = parse("[18446744073709551615, 18446744073709551616, -9223372036854775808, -1]");
  const auto& a = v.as_array();
  EXPECT_EQ(a[0].as_uint64(), 18446744073709551615ull);
  EXPECT_EQ(a[1].as_uint64(), std::nullopt);  // 2^64 does not fit
  EXPECT_EQ(a[2].as_int64(), INT64_MIN);
  EXPECT_EQ(a[3].as_uint64(), std::nullopt);
  EXPECT_EQ(a[3].as_int64(), -1);
}

TEST(JsonLite, DecodesEscapesAndUtf8) {
  const auto v = parse(R"(["a\"b\\c\/\b\f\n\r\t", "\u00e9\u20ac\ud83d\ude00", "é€😀"])");
  const auto& a = v.as_array();
  EXPECT_EQ(a[0].as_string(), "a\"b\\c/\b\f\n\r\t");
  EXPECT_EQ(a[1].as_string(), "\xc3\xa9\xe2\x82\xac\xf0\x9f\x98\x80");
  EXPECT_EQ(a[2].as_string(), a[1].as_string());
}

TEST(JsonLite, QuoteRoundTrips) {
  const std::string s = "q\"b\\n\n\x01 é";
  EXPECT_EQ(json::quote(s), "\"q\\\"b\\\\n\\n\\u0001 é\"");
  EXPECT_EQ(parse(json::quote(s)).as_string(), s);
}

TEST(JsonLite, RejectsMalformedText) {
  const char* bad[] = {
      "",
      "{",
      "{\"a\":}",
      "{\"a\" 1}",
      "[1,]",
      "[1 2]",
      "{\"a\":1,}",
      "01",
      "1.",
      "-",
      "1e",
      ".5",
      "tru",
      "nul",
      "\"abc",
      "\"\\x\"",
      "\"\\u12\"",
      "\"\\ud800\"",
      "\"\\udc00\"",
      "\"a\nb\"",
      "\"\xff\"",
      "\"\xc0\xaf\"",
      "\"\xed\xa0\x80\"",
      "{} x",
      "[1] [2]",
      "{1:2}",
      "'a'",
      "\"\xe2\x82\"",
  };
  for (const char* s : bad)
    expect_error([&] { parse(s); }, ErrorKind::invalid_argument, {"[test] x: invalid JSON"});
}

TEST(JsonLite, RejectsDuplicateKeys) {
  expect_error([] { parse(R"({"a": 1, "b": 2, "a": 3})"); }, ErrorKind::invalid_argument,
               {"duplicate key \"a\""});
}

TEST(JsonLite, RejectsDepthBombs) {
  EXPECT_NO_THROW(parse(std::string(64, '[') + std::string(64, ']')));
  expect_error([] { parse(std::string(65, '[') + std::string(65, ']')); },
               ErrorKind::invalid_argument, {"nesting deeper than 64"});
  // A million open brackets must fail fast, not overflow the stack.
  expect_error([] { parse(std::string(1'000'000, '[')); }, ErrorKind::invalid_argument,
               {"nesting deeper"});
  std::string objs;
  for (int i = 0; i < 100; ++i) objs += "{\"a\":";
  expect_error([&] { parse(objs); }, ErrorKind::invalid_argument, {"nesting deeper"});
}

TEST(JsonLite, AccessorsCheckTheKind) {
  const auto v = parse("[1]");
  expect_error([&] { (void)v.as_string(); }, ErrorKind::invalid_argument,
               {"expected string, got array"});
}

}  // namespace
}  // namespace parley::io

// text/base64.h: the strict rules (tiktoken ranks) and the lenient ones (server bodies).
#include "text/base64.h"

#include <gtest/gtest.h>

namespace parley {
namespace {

constexpr Base64Rules kLenient{.skip_whitespace = true, .require_padding = false};

TEST(Base64, StrictDecodesPaddedGroups) {
  EXPECT_EQ(base64_decode("aGVsbG8="), "hello");
  EXPECT_EQ(base64_decode("aGk="), "hi");
  EXPECT_EQ(base64_decode("aA=="), "h");
  EXPECT_EQ(base64_decode("AAEC/+8="), std::string("\x00\x01\x02\xff\xef", 5));
}

TEST(Base64, StrictRejects) {
  for (const char* bad : {"", "aGk", "aGVs bG8=", "aGVs*G8=", "aG=Vs===", "a===", "aGk=aGk=",
                          "aB==" /* leftover bits not zero */}) {
    EXPECT_FALSE(base64_decode(bad).has_value()) << bad;
  }
}

TEST(Base64, LenientSkipsWhitespaceAndPadding) {
  EXPECT_EQ(base64_decode("aGVs\nbG8=", kLenient), "hello");
  EXPECT_EQ(base64_decode(" aGVs\r\n\tbG8 ", kLenient), "hello");
  EXPECT_EQ(base64_decode("", kLenient), "");
  EXPECT_EQ(base64_decode("aGk", kLenient), "hi");
  for (const char* bad : {"aGVs*G8=", "aG=Vs", "a", "aGk===", "aGVsbG8=x"}) {
    EXPECT_FALSE(base64_decode(bad, kLenient).has_value()) << bad;
  }
}

}  // namespace
}  // namespace parley

// Scalar f32 <-> f16 / bf16 conversions: known bit patterns (rounding to nearest even,
// subnormals, overflow, inf, NaN), exhaustive round trips of every 16-bit pattern, and
// sweeps against independent oracles (the compiler's _Float16 where it has one; a
// nearest-candidate search in double for bf16).
#include <gtest/gtest.h>

#include <bit>
#include <cmath>
#include <cstdint>
#include <limits>

#include "engine/dtype.h"

namespace parley {
namespace {

float from_bits(uint32_t u) { return std::bit_cast<float>(u); }
uint32_t bits(float f) { return std::bit_cast<uint32_t>(f); }
bool is_f16_nan(uint16_t h) { return (h & 0x7c00u) == 0x7c00u && (h & 0x3ffu) != 0; }
bool is_bf16_nan(uint16_t h) { return (h & 0x7f80u) == 0x7f80u && (h & 0x7fu) != 0; }

constexpr float kInf = std::numeric_limits<float>::infinity();

TEST(DType, SizesAndNames) {
  EXPECT_EQ(dtype_size(DType::f32), 4u);
  EXPECT_EQ(dtype_size(DType::f16), 2u);
  EXPECT_EQ(dtype_size(DType::bf16), 2u);
  EXPECT_EQ(dtype_size(DType::i32), 4u);
  EXPECT_EQ(dtype_size(DType::i8), 1u);
  EXPECT_EQ(dtype_name(DType::bf16), "bf16");
  EXPECT_TRUE(is_float(DType::f16));
  EXPECT_FALSE(is_float(DType::i8));
}

TEST(DType, DispatchFloatRejectsIntegers) {
  try {
    dispatch_float(DType::i32, "myop", [](auto) {});
    ADD_FAILURE() << "no error";
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), ErrorKind::unsupported);
    EXPECT_NE(std::string(e.what()).find("[myop]"), std::string::npos) << e.what();
  }
}

TEST(F16, KnownPatterns) {
  EXPECT_EQ(f32_to_f16(1.0f), 0x3c00);
  EXPECT_EQ(f32_to_f16(-2.0f), 0xc000);
  EXPECT_EQ(f32_to_f16(0.5f), 0x3800);
  EXPECT_EQ(f32_to_f16(0.1f), 0x2e66);
  EXPECT_EQ(f32_to_f16(1.0f / 3.0f), 0x3555);
  EXPECT_EQ(f32_to_f16(65504.0f), 0x7bff);  // largest finite
  EXPECT_EQ(f32_to_f16(0.0f), 0x0000);
  EXPECT_EQ(f32_to_f16(-0.0f), 0x8000);
  EXPECT_EQ(f16_to_f32(0x3c00), 1.0f);
  EXPECT_EQ(f16_to_f32(0xc000), -2.0f);
  EXPECT_EQ(f16_to_f32(0x7bff), 65504.0f);
  EXPECT_EQ(bits(f16_to_f32(0x8000)), 0x80000000u);
}

TEST(F16, RoundsToNearestEven) {
  const float ulp = std::ldexp(1.0f, -10);                                // at 1.0
  EXPECT_EQ(f32_to_f16(1.0f + ulp / 2), 0x3c00);                          // tie, even below
  EXPECT_EQ(f32_to_f16(1.0f + 3 * ulp / 2), 0x3c02);                      // tie, even above
  EXPECT_EQ(f32_to_f16(1.0f + ulp / 2 + std::ldexp(1.0f, -20)), 0x3c01);  // just past the tie
  EXPECT_EQ(f32_to_f16(1.0f + ulp / 2 - std::ldexp(1.0f, -20)), 0x3c00);  // just short of it
  EXPECT_EQ(f32_to_f16(-(1.0f + 3 * ulp / 2)), 0xbc02);
  // Carry out of the mantissa into the exponent: 2 - ulp/4 rounds up to 2.
  EXPECT_EQ(f32_to_f16(2.0f - ulp / 4), 0x4000);
}

TEST(F16, Subnormals) {
  const float unit = std::ldexp(1.0f, -24);  // the smallest subnormal
  EXPECT_EQ(f32_to_f16(unit), 0x0001);
  EXPECT_EQ(f32_to_f16(1023 * unit), 0x03ff);  // largest subnormal
  EXPECT_EQ(f32_to_f16(1024 * unit), 0x0400);  // smallest normal, 2^-14
  EXPECT_EQ(f32_to_f16(-unit), 0x8001);
  EXPECT_EQ(f32_to_f16(unit / 2), 0x0000);      // tie between 0 and 1 unit: even is 0
  EXPECT_EQ(f32_to_f16(3 * unit / 2), 0x0002);  // tie between 1 and 2: even is 2
  EXPECT_EQ(f32_to_f16(5 * unit / 2), 0x0002);  // tie between 2 and 3: even is 2
  EXPECT_EQ(f32_to_f16(0.75f * unit), 0x0001);  // past the half
  EXPECT_EQ(f32_to_f16(unit / 4), 0x0000);
  EXPECT_EQ(f32_to_f16(1023.5f * unit), 0x0400);  // tie rounding up into the normals
  EXPECT_EQ(f16_to_f32(0x0001), unit);
  EXPECT_EQ(f16_to_f32(0x03ff), 1023 * unit);
  EXPECT_EQ(f16_to_f32(0x8001), -unit);
  EXPECT_EQ(f16_to_f32(0x0200), 512 * unit);
}

TEST(F16, OverflowInfNaN) {
  EXPECT_EQ(f32_to_f16(65519.99f), 0x7bff);
  EXPECT_EQ(f32_to_f16(65520.0f), 0x7c00);  // the tie above 65504 rounds to even: inf
  EXPECT_EQ(f32_to_f16(1e6f), 0x7c00);
  EXPECT_EQ(f32_to_f16(-1e6f), 0xfc00);
  EXPECT_EQ(f32_to_f16(kInf), 0x7c00);
  EXPECT_EQ(f32_to_f16(-kInf), 0xfc00);
  EXPECT_TRUE(is_f16_nan(f32_to_f16(std::numeric_limits<float>::quiet_NaN())));
  EXPECT_TRUE(is_f16_nan(f32_to_f16(from_bits(0x7f800001u))));  // signalling, tiny payload
  EXPECT_TRUE(is_f16_nan(f32_to_f16(from_bits(0xffc00000u))));
  EXPECT_EQ(f16_to_f32(0x7c00), kInf);
  EXPECT_EQ(f16_to_f32(0xfc00), -kInf);
  EXPECT_TRUE(std::isnan(f16_to_f32(0x7e00)));
  EXPECT_TRUE(std::isnan(f16_to_f32(0x7c01)));
}

TEST(F16, EveryPatternRoundTrips) {
  for (uint32_t h = 0; h <= 0xffff; ++h) {
    const float f = f16_to_f32(uint16_t(h));
    const uint16_t back = f32_to_f16(f);
    if (is_f16_nan(uint16_t(h))) {
      ASSERT_TRUE(std::isnan(f)) << std::hex << h;
      ASSERT_TRUE(is_f16_nan(back)) << std::hex << h;
    } else {
      ASSERT_EQ(back, h) << std::hex << h;
    }
  }
}

#if defined(__FLT16_MAX__)
// The compiler's _Float16 conversions are IEEE round-to-nearest-even: an independent oracle.
TEST(F16, MatchesCompilerFloat16) {
  for (uint32_t h = 0; h <= 0xffff; ++h) {
    const _Float16 x = std::bit_cast<_Float16>(uint16_t(h));
    const float want = float(x), got = f16_to_f32(uint16_t(h));
    if (std::isnan(want))
      ASSERT_TRUE(std::isnan(got)) << std::hex << h;
    else
      ASSERT_EQ(bits(got), bits(want)) << std::hex << h;
  }
  // f32 patterns spread over the whole range, plus every f16 value's exact ties.
  auto check = [](uint32_t u) {
    const float f = from_bits(u);
    const uint16_t want = std::bit_cast<uint16_t>(_Float16(f)), got = f32_to_f16(f);
    if (std::isnan(f))
      ASSERT_TRUE(is_f16_nan(got)) << std::hex << u;
    else
      ASSERT_EQ(got, want) << "f32 bits " << std::hex << u;
  };
  for (uint64_t u = 0; u <= 0xffffffffu; u += 1021) check(uint32_t(u));
  for (uint32_t h = 0; h < 0x7c00; ++h) {
    const uint32_t base = bits(f16_to_f32(uint16_t(h)));
    for (uint32_t d : {1u, 0xfffu, 0x1000u, 0x1001u}) check(base + d);  // normals: tie at 0x1000
  }
}
#endif

TEST(BF16, KnownPatterns) {
  EXPECT_EQ(f32_to_bf16(1.0f), 0x3f80);
  EXPECT_EQ(f32_to_bf16(-2.0f), 0xc000);
  EXPECT_EQ(f32_to_bf16(3.14159265f), 0x4049);
  EXPECT_EQ(f32_to_bf16(-0.0f), 0x8000);
  EXPECT_EQ(bf16_to_f32(0x3f80), 1.0f);
  EXPECT_EQ(bf16_to_f32(0x4049), 3.140625f);
  EXPECT_EQ(bf16_to_f32(0xc000), -2.0f);
}

TEST(BF16, RoundsToNearestEven) {
  EXPECT_EQ(f32_to_bf16(from_bits(0x3f808000u)), 0x3f80);  // tie, even below
  EXPECT_EQ(f32_to_bf16(from_bits(0x3f818000u)), 0x3f82);  // tie, even above
  EXPECT_EQ(f32_to_bf16(from_bits(0x3f808001u)), 0x3f81);
  EXPECT_EQ(f32_to_bf16(from_bits(0x3f807fffu)), 0x3f80);
  EXPECT_EQ(f32_to_bf16(from_bits(0x3fffffffu)), 0x4000);  // carry into the exponent
  EXPECT_EQ(f32_to_bf16(from_bits(0xbf818000u)), 0xbf82);
  EXPECT_EQ(f32_to_bf16(std::numeric_limits<float>::max()), 0x7f80);  // rounds to inf
}

TEST(BF16, SubnormalsInfNaN) {
  EXPECT_EQ(f32_to_bf16(from_bits(0x00010000u)), 0x0001);
  EXPECT_EQ(f32_to_bf16(from_bits(0x00008000u)), 0x0000);  // tie to even zero
  EXPECT_EQ(f32_to_bf16(from_bits(0x00018000u)), 0x0002);
  EXPECT_EQ(f32_to_bf16(from_bits(0x00000001u)), 0x0000);
  EXPECT_EQ(bf16_to_f32(0x0001), from_bits(0x00010000u));
  EXPECT_EQ(f32_to_bf16(kInf), 0x7f80);
  EXPECT_EQ(f32_to_bf16(-kInf), 0xff80);
  EXPECT_EQ(f32_to_bf16(std::numeric_limits<float>::quiet_NaN()), 0x7fc0);
  // A NaN whose payload sits in the low bits only must not round to inf.
  EXPECT_TRUE(is_bf16_nan(f32_to_bf16(from_bits(0x7f800001u))));
  EXPECT_TRUE(is_bf16_nan(f32_to_bf16(from_bits(0xff800001u))));
  EXPECT_EQ(bf16_to_f32(0x7f80), kInf);
  EXPECT_TRUE(std::isnan(bf16_to_f32(0x7fc0)));
}

TEST(BF16, EveryPatternRoundTrips) {
  for (uint32_t h = 0; h <= 0xffff; ++h) {
    const float f = bf16_to_f32(uint16_t(h));
    const uint16_t back = f32_to_bf16(f);
    if (is_bf16_nan(uint16_t(h))) {
      ASSERT_TRUE(std::isnan(f)) << std::hex << h;
      ASSERT_TRUE(is_bf16_nan(back)) << std::hex << h;
    } else {
      ASSERT_EQ(back, h) << std::hex << h;
    }
  }
}

// Oracle: the nearer of the two bf16 neighbours (truncation and the next pattern up in
// magnitude), measured in double; on a tie the one with an even last bit. The pattern past
// the largest finite one stands for 2^128 (IEEE rounds to inf from half an ulp beyond max).
uint16_t bf16_oracle(float f) {
  const uint32_t u = bits(f);
  const uint16_t lo = uint16_t(u >> 16), hi = uint16_t(lo + 1);
  auto value = [](uint16_t b) {
    if ((b & 0x7fffu) == 0x7f80u)
      return std::copysign(std::ldexp(1.0, 128), double(bf16_to_f32(b)));
    return double(bf16_to_f32(b));
  };
  const double dlo = std::abs(double(f) - value(lo)), dhi = std::abs(double(f) - value(hi));
  if (dlo != dhi) return dlo < dhi ? lo : hi;
  return (lo & 1u) ? hi : lo;
}

TEST(BF16, MatchesNearestCandidateOracle) {
  auto check = [](uint32_t u) {
    const float f = from_bits(u);
    if (std::isnan(f) || std::isinf(f)) return;
    ASSERT_EQ(f32_to_bf16(f), bf16_oracle(f)) << "f32 bits " << std::hex << u;
  };
  for (uint64_t u = 0; u <= 0xffffffffu; u += 1021) check(uint32_t(u));
  for (uint32_t h = 0; h <= 0xffff; ++h)  // every tie and its neighbours
    for (uint32_t d : {0x7fffu, 0x8000u, 0x8001u}) check((h << 16) | d);
}

TEST(FloatDispatch, ScalarHelpersAgree) {
  EXPECT_EQ(to_f32(from_f32<f16_t>(0.1f)), f16_to_f32(0x2e66));
  EXPECT_EQ(from_f32<bf16_t>(1.0f).bits, 0x3f80);
  EXPECT_EQ(to_f32(from_f32<float>(0.1f)), 0.1f);
}

}  // namespace
}  // namespace parley

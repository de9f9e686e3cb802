// Element types of tensors, their sizes and names, and the scalar conversions between
// f32 and the 16-bit float formats (IEEE binary16 and bfloat16, round to nearest even).
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <string_view>

#include "engine/error.h"

namespace parley {

enum class DType : uint8_t { f32, f16, bf16, i32, i8 };

constexpr size_t dtype_size(DType t) {
  switch (t) {
    case DType::f32: return 4;
    case DType::f16: return 2;
    case DType::bf16: return 2;
    case DType::i32: return 4;
    case DType::i8: return 1;
  }
  return 0;
}

constexpr bool is_float(DType t) { return t == DType::f32 || t == DType::f16 || t == DType::bf16; }

std::string_view dtype_name(DType t);

// Storage types for the 16-bit formats: raw bits, converted explicitly.
struct f16_t {
  uint16_t bits;
};
struct bf16_t {
  uint16_t bits;
};

inline float bf16_to_f32(uint16_t b) {
  uint32_t u = uint32_t(b) << 16;
  float f;
  std::memcpy(&f, &u, 4);
  return f;
}

inline uint16_t f32_to_bf16(float f) {
  uint32_t u;
  std::memcpy(&u, &f, 4);
  if ((u & 0x7f800000u) == 0x7f800000u && (u & 0x007fffffu))
    return uint16_t((u >> 16) | 0x40);  // NaN stays NaN
  u += 0x7fffu + ((u >> 16) & 1u);      // round to nearest even
  return uint16_t(u >> 16);
}

float f16_to_f32(uint16_t h);
uint16_t f32_to_f16(float f);

// Calls fn with a value of the C++ storage type for a float dtype (float, f16_t or
// bf16_t), so one generic lambda serves every float dtype (MLX's dispatch_float_types).
template <typename Fn>
decltype(auto) dispatch_float(DType t, std::string_view op, Fn&& fn) {
  switch (t) {
    case DType::f32: return fn(float{});
    case DType::f16: return fn(f16_t{});
    case DType::bf16: return fn(bf16_t{});
    default: break;
  }
  throw Error(ErrorKind::unsupported, "[" + std::string(op) + "] dtype " +
                                          std::string(dtype_name(t)) + " is not a float type");
}

inline float to_f32(float x) { return x; }
inline float to_f32(f16_t x) { return f16_to_f32(x.bits); }
inline float to_f32(bf16_t x) { return bf16_to_f32(x.bits); }
template <typename T>
T from_f32(float x);
template <>
inline float from_f32<float>(float x) {
  return x;
}
template <>
inline f16_t from_f32<f16_t>(float x) {
  return f16_t{f32_to_f16(x)};
}
template <>
inline bf16_t from_f32<bf16_t>(float x) {
  return bf16_t{f32_to_bf16(x)};
}

}  // namespace parley

// Argument checks shared by the op dispatchers in this folder (internal to the engine).
// Every failure throws parley::Error whose message starts with the op's name:
//   "[matmul] a f32[2, 3] and b f32[4, 5]: inner dimensions 3 and 4 differ".
// Each public op validates once here, so the cpu:: and cuda:: implementations may assume
// consistent shapes, dtypes and devices.
#pragma once

#include <initializer_list>
#include <string>
#include <string_view>
#include <type_traits>

#include "engine/tensor.h"

namespace parley::detail {

// A tensor argument and the name the messages give it; t may be null (an absent optional).
struct Arg {
  const char* name;
  const Tensor* t;
};

// "f32[2, 3]": dtype and shape, the way messages show a tensor.
std::string tensor_str(const Tensor& t);
// "a f32[2, 3]"
std::string arg_str(const char* name, const Tensor& t);

[[noreturn]] void fail(std::string_view op, const std::string& message,
                       ErrorKind kind = ErrorKind::invalid_argument);
inline void require(bool cond, std::string_view op, const std::string& message) {
  if (!cond) fail(op, message);
}
// The same with the message built only on failure: every op validates its arguments on
// every call, and a decoder step makes about a hundred calls (format nothing when fine).
template <typename MakeMessage>
requires std::is_invocable_r_v<std::string, MakeMessage>
inline void require(bool cond, std::string_view op, MakeMessage&& make_message) {
  if (!cond) fail(op, make_message());
}

// Every present argument has memory (or no elements) and all live on one device;
// returns that device.
Device check_args(std::string_view op, std::initializer_list<Arg> args);
void check_float(std::string_view op, const char* name, const Tensor& t);
void check_dtype(std::string_view op, const char* name, const Tensor& t, DType want);
void check_shape(std::string_view op, const char* name, const Tensor& t, const Shape& want);
// Optional per-channel parameters (bias, gamma, beta): [n], f32 or `like`'s dtype.
void check_param(std::string_view op, const char* name, const Tensor& t, int64_t n, DType like);
// Whether the bytes of a and b (as the contiguous ranges their data and nbytes span) meet.
bool overlap(const Tensor& a, const Tensor& b);

}  // namespace parley::detail

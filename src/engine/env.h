// Environment switches that turn a piece of the fast path off, to measure it against its
// alternative (README lists them: PARLEY_CUDA_GRAPHS=0, PARLEY_GEMV=0, ...).
#pragma once

#include <cstdlib>
#include <cstring>

namespace parley {

// Whether the switch `name` is on: unless the variable is set to "0". Read at each call;
// callers that must not change their mind within a process keep the first answer.
inline bool env_switch_on(const char* name) {
  const char* v = std::getenv(name);
  return !(v && std::strcmp(v, "0") == 0);
}

}  // namespace parley

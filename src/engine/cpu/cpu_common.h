// Small helpers shared by the CPU op implementations in this folder (internal).
#pragma once

#include <algorithm>
#include <cstdint>

#include "engine/dtype.h"
#include "engine/threadpool.h"

namespace parley::cpu {

// Elements per parallel_for chunk for cheap element-wise work: below this, waking the
// workers costs more than the loop.
constexpr int64_t kElementGrain = int64_t(1) << 14;

// Rows per chunk when each row costs about `row_cost` element operations.
inline int64_t row_grain(int64_t row_cost) {
  return std::max<int64_t>(1, kElementGrain / std::max<int64_t>(row_cost, 1));
}

// Loads n elements of any float storage type into f32.
template <typename T>
inline void load_f32(const T* src, float* dst, int64_t n) {
  for (int64_t i = 0; i < n; ++i) dst[i] = to_f32(src[i]);
}

}  // namespace parley::cpu

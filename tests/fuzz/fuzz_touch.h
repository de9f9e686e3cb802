// Shared by the fuzz targets: reads every byte of a parsed tensor, so AddressSanitizer
// sees any view that points outside the input.
#pragma once

#include <cstddef>
#include <cstdint>

#include "engine/tensor.h"

namespace parley::fuzz {

inline void touch(const Tensor& t) {
  const auto* p = static_cast<const uint8_t*>(t.raw());
  uint8_t acc = 0;
  for (size_t i = 0; i < t.nbytes(); ++i) acc = uint8_t(acc ^ p[i]);
  volatile uint8_t sink = acc;
  (void)sink;
}

}  // namespace parley::fuzz

// Philox4x32-10; constants from Random123's philox.h (the paper's M0, M1, W0, W1).
#include "sampling/philox.h"

namespace parley {

namespace {
constexpr uint32_t kMul0 = 0xD2511F53u;
constexpr uint32_t kMul1 = 0xCD9E8D57u;
constexpr uint32_t kWeyl0 = 0x9E3779B9u;  // golden ratio
constexpr uint32_t kWeyl1 = 0xBB67AE85u;  // sqrt(3) - 1

PhiloxCounter round(PhiloxCounter c, PhiloxKey k) {
  const uint64_t p0 = uint64_t(kMul0) * c[0];
  const uint64_t p1 = uint64_t(kMul1) * c[2];
  return {uint32_t(p1 >> 32) ^ c[1] ^ k[0], uint32_t(p1), uint32_t(p0 >> 32) ^ c[3] ^ k[1],
          uint32_t(p0)};
}
}  // namespace

PhiloxCounter philox4x32_10(PhiloxCounter counter, PhiloxKey key) {
  for (int r = 0; r < 10; ++r) {
    if (r > 0) {
      key[0] += kWeyl0;
      key[1] += kWeyl1;
    }
    counter = round(counter, key);
  }
  return counter;
}

double philox_uniform(uint64_t seed, uint64_t stream, uint64_t step) {
  const PhiloxCounter out = philox4x32_10(
      {uint32_t(step), uint32_t(step >> 32), uint32_t(stream), uint32_t(stream >> 32)},
      {uint32_t(seed), uint32_t(seed >> 32)});
  const uint64_t bits = ((uint64_t(out[0]) << 32) | out[1]) >> 11;
  return double(bits) * 0x1.0p-53;
}

}  // namespace parley

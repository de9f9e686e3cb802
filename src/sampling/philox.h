// Philox4x32-10 (Salmon et al., "Parallel random numbers: as easy as 1, 2, 3", SC 2011), the
// counter-based generator behind each request's random stream. A draw is a pure function of
// (key, counter), so a request's tokens depend on its seed and its own step count only, never
// on the other rows of a batch, the thread count or what ran before. It is also the
// generator cuRAND and Random123 ship, so the later CUDA sampler can reproduce every draw.
#pragma once

#include <array>
#include <cstdint>

namespace parley {

using PhiloxCounter = std::array<uint32_t, 4>;
using PhiloxKey = std::array<uint32_t, 2>;

// Ten rounds of Philox4x32 on `counter` under `key` (Random123's philox4x32_R(10, ...)).
PhiloxCounter philox4x32_10(PhiloxCounter counter, PhiloxKey key);

// A uniform double in [0, 1) with 53 random bits: key = seed (low word first), counter =
// (step low, step high, stream low, stream high); the first two output words give the bits.
// stream tells apart the streams of one seed (e.g. the n choices of one request).
double philox_uniform(uint64_t seed, uint64_t stream, uint64_t step);

}  // namespace parley

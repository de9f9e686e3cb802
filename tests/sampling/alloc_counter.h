// Counts every operator new of the test_sampling executable (alloc_counter.cpp replaces the
// global one), so a test can assert that a loop allocates nothing at all: alloc_stats()
// sees only the engine's own system allocations, not std::vector's.
#pragma once

#include <cstdint>

namespace parley::test {

int64_t operator_new_calls();

}  // namespace parley::test

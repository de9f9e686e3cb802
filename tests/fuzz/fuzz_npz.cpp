// libFuzzer target: parse_npz on arbitrary bytes (CRC checks off so mutated inputs reach
// the inflater and the .npy parser), with and without int64 arrays, and parse_npy /
// parse_npy_int64 on the same bytes.
#include <cstddef>
#include <cstdint>
#include <map>
#include <string>

#include "fuzz_touch.h"
#include "io/npy.h"
#include "io/npz.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  try {
    const auto m = parley::io::parse_npz({data, size}, nullptr, "fuzz.npz", {.verify_crc = false});
    for (const auto& [name, t] : m) parley::fuzz::touch(t);
  } catch (const parley::Error&) {
  }
  try {
    std::map<std::string, parley::io::Int64Array> int64;
    parley::io::NpzOptions o;
    o.verify_crc = false;
    o.int64_arrays = &int64;
    const auto m = parley::io::parse_npz({data, size}, nullptr, "fuzz.npz", o);
    for (const auto& [name, t] : m) parley::fuzz::touch(t);
  } catch (const parley::Error&) {
  }
  try {
    parley::fuzz::touch(parley::io::parse_npy({data, size}, nullptr, "[npy] fuzz.npy"));
  } catch (const parley::Error&) {
  }
  try {
    const auto a = parley::io::parse_npy_int64({data, size}, "[npy] fuzz.npy");
    volatile int64_t sum = 0;
    if (a)
      for (int64_t v : a->values) sum = sum + v;
  } catch (const parley::Error&) {
  }
  return 0;
}

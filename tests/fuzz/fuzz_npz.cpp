// libFuzzer target: parse_npz on arbitrary bytes (CRC checks off so mutated inputs reach
// the inflater and the .npy parser), and parse_npy on the same bytes.
#include <cstddef>
#include <cstdint>

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
    parley::fuzz::touch(parley::io::parse_npy({data, size}, nullptr, "[npy] fuzz.npy"));
  } catch (const parley::Error&) {
  }
  return 0;
}

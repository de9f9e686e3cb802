// libFuzzer target: parse_safetensors on arbitrary bytes must throw parley::Error or
// return tensors that lie inside the input.
#include <cstddef>
#include <cstdint>

#include "fuzz_touch.h"
#include "io/safetensors.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  try {
    const auto f = parley::io::parse_safetensors({data, size}, nullptr, "fuzz.safetensors");
    for (const auto& [name, t] : f.tensors) parley::fuzz::touch(t);
  } catch (const parley::Error&) {
  }
  return 0;
}

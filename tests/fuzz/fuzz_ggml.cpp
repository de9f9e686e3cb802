// libFuzzer target: parse_ggml_whisper (whisper.cpp legacy .bin) on arbitrary bytes.
#include <cstddef>
#include <cstdint>

#include "fuzz_touch.h"
#include "io/ggml_legacy.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  try {
    const auto f = parley::io::parse_ggml_whisper({data, size}, nullptr, "fuzz.bin");
    parley::fuzz::touch(f.mel_filters);
    for (const auto& [name, t] : f.tensors) parley::fuzz::touch(t);
  } catch (const parley::Error&) {
  }
  return 0;
}

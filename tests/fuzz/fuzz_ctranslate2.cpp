// libFuzzer target for the CTranslate2 model.bin reader: any input must parse or throw
// parley::Error, never crash, hang or read out of bounds. Seeds: corpus/ctranslate2/.
#include <cstddef>
#include <cstdint>
#include <span>

#include "engine/error.h"
#include "io/ctranslate2.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  try {
    const auto m = parley::io::parse_ctranslate2(std::span<const uint8_t>(data, size), "fuzz.bin");
    // Touch what a loader would: every tensor's bytes and every scalar.
    uint8_t sink = 0;
    for (const auto& [name, t] : m.tensors)
      if (t.nbytes()) sink ^= static_cast<const uint8_t*>(t.raw())[t.nbytes() - 1];
    for (const auto& [name, v] : m.variables)
      if (v.shape.numel() == 1 && v.type != parley::io::Ct2Type::float32) {
        try {
          sink ^= uint8_t(m.scalar_int(name));
        } catch (const parley::Error&) {
        }
      }
    volatile uint8_t keep = sink;
    (void)keep;
  } catch (const parley::Error&) {
  }
  return 0;
}

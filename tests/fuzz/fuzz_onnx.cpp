// libFuzzer target for the ONNX weight reader and its protobuf wire reader: any input
// must parse or throw parley::Error, never crash, hang or read out of bounds.
// Seeds: corpus/onnx/.
#include <cstddef>
#include <cstdint>
#include <span>

#include "engine/error.h"
#include "io/onnx.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  try {
    const auto m = parley::io::parse_onnx(std::span<const uint8_t>(data, size), "fuzz.onnx");
    // Touch every tensor's last byte and every INT64 value, as a loader would.
    uint8_t sink = 0;
    for (const auto& [name, t] : m.tensors)
      if (t.nbytes()) sink ^= static_cast<const uint8_t*>(t.raw())[t.nbytes() - 1];
    for (const auto& [name, t] : m.int64_tensors)
      for (int64_t v : t.values) sink ^= uint8_t(v);
    volatile uint8_t keep = sink;
    (void)keep;
  } catch (const parley::Error&) {
  }
  return 0;
}

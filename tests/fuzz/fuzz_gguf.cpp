// libFuzzer target: parse_gguf on arbitrary bytes, then every tensor's data: float views,
// Q8_0 dequantization and raw bytes of other known types.
#include <cstddef>
#include <cstdint>

#include "fuzz_touch.h"
#include "io/gguf.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace parley::io;
  try {
    const GgufFile f = parse_gguf({data, size}, nullptr, "fuzz.gguf");
    for (const GgufTensorInfo& info : f.tensors()) {
      try {
        if (ggml_type_dtype(info.type)) {
          parley::fuzz::touch(f.tensor(info.name));
        } else if (info.type == uint32_t(GgmlType::q8_0)) {
          parley::fuzz::touch(dequantize_q8_0(f.raw(info.name), info.shape));
        } else {
          volatile size_t n = f.raw(info.name).size();
          (void)n;
        }
      } catch (const parley::Error&) {
      }
    }
  } catch (const parley::Error&) {
  }
  return 0;
}

// libFuzzer target: parse_gguf on arbitrary bytes, then every tensor's data (float views,
// the dequantization of every quantized type parley reads, raw bytes of the rest) and the
// chat-model metadata paths: the tokenizer from tokenizer.ggml.* (Tokenizer::from_gguf),
// then an encode and decode with it.
#include <cstddef>
#include <cstdint>

#include "fuzz_touch.h"
#include "io/ggml_types.h"
#include "io/gguf.h"
#include "text/tokenizer.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace parley::io;
  try {
    const GgufFile f = parse_gguf({data, size}, nullptr, "fuzz.gguf");
    for (const GgufTensorInfo& info : f.tensors()) {
      try {
        if (ggml_type_dtype(info.type)) {
          parley::fuzz::touch(f.tensor(info.name));
        } else {
          parley::fuzz::touch(dequantize_ggml(info.type, f.raw(info.name), info.shape));
        }
      } catch (const parley::Error&) {
      }
    }
    try {
      const parley::Tokenizer tok = parley::Tokenizer::from_gguf(f);
      const auto ids = tok.encode("Hello, world! 123 \xe4\xbd\xa0\xe5\xa5\xbd <|im_end|>");
      volatile size_t n = tok.decode(ids).size();
      (void)n;
    } catch (const parley::Error&) {
    }
  } catch (const parley::Error&) {
  }
  return 0;
}

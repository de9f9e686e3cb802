// Every reader against empty files, missing files and the other formats' files: each must
// throw a parley::Error naming its format and the file, never crash. (Per-format malformed
// and truncation cases live in each format's test file.)
#include <functional>

#include "io/ggml_legacy.h"
#include "io/gguf.h"
#include "io/npy.h"
#include "io/npz.h"
#include "io/safetensors.h"
#include "io_test_util.h"

namespace parley::io {
namespace {

using testing::expect_error;

struct Reader {
  const char* format;  // "[gguf]"
  std::function<void(const std::string&)> read;
};

const Reader kReaders[] = {
    {"[safetensors]", [](const std::string& p) { read_safetensors(p); }},
    {"[npz]", [](const std::string& p) { read_npz(p); }},
    {"[npy]", [](const std::string& p) { read_npy(p); }},
    {"[gguf]", [](const std::string& p) { read_gguf(p); }},
    {"[ggml]", [](const std::string& p) { read_ggml_whisper(p); }},
};

TEST(Malformed, EmptyFilesFailWithTheirName) {
  const std::string path = testing::temp_path("empty.bin");
  testing::write_bytes(path, {});
  for (const Reader& r : kReaders) {
    SCOPED_TRACE(r.format);
    expect_error([&] { r.read(path); }, ErrorKind::invalid_argument, {r.format, path});
  }
}

TEST(Malformed, MissingFilesAreNotFound) {
  for (const Reader& r : kReaders)
    expect_error([&] { r.read("/nonexistent/model.bin"); }, ErrorKind::not_found,
                 {"/nonexistent/model.bin"});
}

TEST(Malformed, OtherFormatsAreRejected) {
  const std::string files[] = {"whisper/mel_filters.npz", "whisper/for-tests-ggml-tiny.bin",
                               "vad/silero_vad_v6.2_16k.safetensors", "whisper/english.json"};
  for (const std::string& f : files) {
    for (const Reader& r : kReaders) {
      const bool own = (f.ends_with(".npz") && std::string(r.format) == "[npz]") ||
                       (f.ends_with(".bin") && std::string(r.format) == "[ggml]") ||
                       (f.ends_with(".safetensors") && std::string(r.format) == "[safetensors]");
      if (own) continue;
      SCOPED_TRACE(std::string(r.format) + " on " + f);
      const std::string path = testing::data_path(f);
      expect_error([&] { r.read(path); }, ErrorKind::invalid_argument, {r.format, path});
    }
  }
}

TEST(Malformed, RandomBytesNeverCrash) {
  // Deterministic pseudo-random files, some starting with a real magic.
  uint64_t state = 0x9e3779b97f4a7c15ull;
  auto next = [&] {
    state ^= state << 13, state ^= state >> 7, state ^= state << 17;
    return state;
  };
  const std::string magics[] = {"", "GGUF\x03\0\0\0", "lmgg", "\x93NUMPY\x01\0", "PK\x03\x04"};
  for (int i = 0; i < 2000; ++i) {
    testing::Bytes b(size_t(next() % 300));
    for (auto& x : b) x = uint8_t(next());
    const std::string& m = magics[size_t(i) % 5];
    for (size_t k = 0; k < m.size() && k < b.size(); ++k) b[k] = uint8_t(m[k]);
    auto quietly = [](const std::function<void()>& fn) {
      try {
        fn();
      } catch (const Error&) {
      }
    };
    quietly([&] { parse_safetensors(b, nullptr, "r"); });
    quietly([&] { parse_npz(b, nullptr, "r", NpzOptions{.verify_crc = false}); });
    quietly([&] { parse_npy(b, nullptr, "r"); });
    quietly([&] { parse_gguf(b, nullptr, "r"); });
    quietly([&] { parse_ggml_whisper(b, nullptr, "r"); });
  }
}

}  // namespace
}  // namespace parley::io

// whisper.cpp legacy ggml .bin: the real tiny / tiny.en headers (hparams, mel filters,
// vocabulary, no tensors) and synthetic files with tensors.
#include "io/ggml_legacy.h"

#include "io/npz.h"
#include "io_test_util.h"

namespace parley::io {
namespace {

using testing::Bytes;
using testing::expect_error;
using testing::GgmlTensorSpec;

GgmlWhisperFile parse(const Bytes& b) { return parse_ggml_whisper(b, nullptr, "m.bin"); }

const std::vector<int32_t> kTinyHparams = {51865, 1500, 384, 6, 4, 448, 384, 6, 4, 80, 1};

void expect_tiny_hparams(const WhisperHparams& h, int32_t n_vocab) {
  EXPECT_EQ(h.n_vocab, n_vocab);
  EXPECT_EQ(h.n_audio_ctx, 1500);
  EXPECT_EQ(h.n_audio_state, 384);
  EXPECT_EQ(h.n_audio_head, 6);
  EXPECT_EQ(h.n_audio_layer, 4);
  EXPECT_EQ(h.n_text_ctx, 448);
  EXPECT_EQ(h.n_text_state, 384);
  EXPECT_EQ(h.n_text_head, 6);
  EXPECT_EQ(h.n_text_layer, 4);
  EXPECT_EQ(h.n_mels, 80);
  EXPECT_EQ(h.ftype, 1);
}

void expect_filters_match_npz(const Tensor& filters) {
  const TensorMap npz = read_npz(testing::data_path("whisper/mel_filters.npz"));
  const Tensor& ref = npz.at("test", "mel_80");
  ASSERT_EQ(filters.shape(), Shape({80, 201}));
  ASSERT_EQ(filters.dtype(), DType::f32);
  // Equal values; not bit-identical: element [0, 0] is -0.0 in the npz and +0.0 here.
  int64_t differ = 0;
  for (int64_t i = 0; i < ref.numel(); ++i)
    differ += filters.data<float>()[i] != ref.data<float>()[i];
  EXPECT_EQ(differ, 0);
  EXPECT_NE(std::memcmp(filters.raw(), ref.raw(), ref.nbytes()), 0);
}

TEST(GgmlLegacy, ReadsTinyMultilingualHeader) {
  const auto f = read_ggml_whisper(testing::data_path("whisper/for-tests-ggml-tiny.bin"));
  expect_tiny_hparams(f.hparams, 51865);
  expect_filters_match_npz(f.mel_filters);
  // The file stores the 50257 GPT-2 byte-level tokens; whisper.cpp synthesizes the rest.
  ASSERT_EQ(f.vocab.size(), 50257u);
  EXPECT_EQ(f.vocab[0], "!");
  EXPECT_EQ(f.vocab[1], "\"");
  EXPECT_EQ(f.vocab[220], " ");
  EXPECT_EQ(f.vocab[50255], "\xe5\x9c\xba");  // 场
  EXPECT_EQ(f.vocab[50256], "");              // multilingual: no <|endoftext|> text here
  EXPECT_TRUE(f.tensors.empty());
}

TEST(GgmlLegacy, ReadsTinyEnglishHeader) {
  const auto f = read_ggml_whisper(testing::data_path("whisper/for-tests-ggml-tiny.en.bin"));
  expect_tiny_hparams(f.hparams, 51864);
  expect_filters_match_npz(f.mel_filters);
  ASSERT_EQ(f.vocab.size(), 50257u);
  EXPECT_EQ(f.vocab[0], "!");
  EXPECT_EQ(f.vocab[50255], " gazed");
  EXPECT_EQ(f.vocab[50256], "<|endoftext|>");
  EXPECT_TRUE(f.tensors.empty());
}

Bytes f32_data(const std::vector<float>& v) { return testing::as_bytes(v); }

Bytes synthetic_file() {
  std::vector<uint16_t> h = {f32_to_f16(1.5f), f32_to_f16(-2.f), f32_to_f16(0.25f),
                             f32_to_f16(8.f),  f32_to_f16(0.f),  f32_to_f16(-0.5f)};
  return testing::build_ggml(
      kTinyHparams, 2, 3, {0.f, 1.f, 2.f, 3.f, 4.f, 5.f}, {"a", "bc", ""},
      {GgmlTensorSpec{"encoder.conv1.weight", {3, 2}, 1, testing::as_bytes(h)},
       GgmlTensorSpec{"encoder.conv1.bias", {2}, 0, f32_data({0.5f, -1.f})},
       GgmlTensorSpec{"decoder.ln.weight", {4, 1, 2}, 0, f32_data({1, 2, 3, 4, 5, 6, 7, 8})}});
}

TEST(GgmlLegacy, ReadsSyntheticTensors) {
  const Bytes file = synthetic_file();
  const auto f = parse(file);
  EXPECT_EQ(f.mel_filters.shape(), Shape({2, 3}));
  EXPECT_EQ(f.mel_filters.data<float>()[5], 5.f);
  EXPECT_EQ(f.vocab, (std::vector<std::string>{"a", "bc", ""}));
  ASSERT_EQ(f.tensors.size(), 3u);
  const Tensor& w = f.tensors.at("t", "encoder.conv1.weight");
  EXPECT_EQ(w.shape(), Shape({2, 3}));  // ggml ne [3, 2] reversed
  EXPECT_EQ(w.dtype(), DType::f16);
  EXPECT_EQ(f16_to_f32(w.data<uint16_t>()[3]), 8.f);  // row 1, column 0
  const Tensor& b = f.tensors.at("t", "encoder.conv1.bias");
  EXPECT_EQ(b.shape(), Shape({2}));
  EXPECT_EQ(b.data<float>()[1], -1.f);
  const Tensor& ln = f.tensors.at("t", "decoder.ln.weight");
  EXPECT_EQ(ln.shape(), Shape({2, 1, 4}));
  EXPECT_EQ(ln.data<float>()[7], 8.f);
  // Records are packed, so f32 data may sit at any offset; the reader copies those.
  EXPECT_EQ(reinterpret_cast<uintptr_t>(ln.raw()) % 4, 0u);
}

TEST(GgmlLegacy, ReadsSyntheticTensorsFromDisk) {
  const std::string path = testing::temp_path("synthetic.bin");
  testing::write_bytes(path, synthetic_file());
  const auto f = read_ggml_whisper(path);
  EXPECT_EQ(f.tensors.size(), 3u);
  expect_error([&] { (void)f.tensors.at("[ggml] " + path, "nope"); }, ErrorKind::not_found,
               {path, "no tensor named 'nope'"});
}

TEST(GgmlLegacy, RejectsMalformedFiles) {
  const auto file_with = [](const std::vector<GgmlTensorSpec>& tensors) {
    return testing::build_ggml(kTinyHparams, 1, 2, {0.f, 1.f}, {"x"}, tensors);
  };
  struct Case {
    Bytes bytes;
    ErrorKind kind;
    const char* message;
  };
  Bytes bad_magic = synthetic_file();
  bad_magic[0] = 0;
  Bytes bad_filters = testing::build_ggml(kTinyHparams, 1 << 30, 1 << 30, {}, {}, {});
  Bytes neg_filters = testing::build_ggml(kTinyHparams, -1, 4, {}, {}, {});
  Bytes bad_vocab = testing::build_ggml(kTinyHparams, 0, 0, {}, {}, {});
  bad_vocab.resize(bad_vocab.size() - 4);
  testing::ByteWriter big_count;
  big_count.put<int32_t>(1 << 30);
  bad_vocab.insert(bad_vocab.end(), big_count.out().begin(), big_count.out().end());
  Bytes bad_token = testing::build_ggml(kTinyHparams, 0, 0, {}, {"abc"}, {});
  bad_token[bad_token.size() - 4 - 3] = 0xff;  // token length 0xff, 3 bytes left
  const Case cases[] = {
      {{}, ErrorKind::invalid_argument, "file is 0 bytes"},
      {bad_magic, ErrorKind::invalid_argument, "bad magic"},
      {bad_filters, ErrorKind::invalid_argument, "mel filters 1073741824x1073741824 do not fit"},
      {neg_filters, ErrorKind::invalid_argument, "mel filters -1x4"},
      {bad_vocab, ErrorKind::invalid_argument, "vocabulary size 1073741824 is impossible"},
      {bad_token, ErrorKind::invalid_argument, "token 0 length 255 runs past the end"},
      {file_with({{"x", {2}, 2, Bytes(36)}}), ErrorKind::invalid_argument,
       "row length 2 is not a multiple of the q4_0 block size"},
      {file_with({{"x", {32}, 2, Bytes(18)}}), ErrorKind::unsupported,
       "tensor 'x' has ggml type q4_0; only f32 and f16"},
      {file_with({{"x", {2}, 77, Bytes(8)}}), ErrorKind::invalid_argument, "unknown ggml type 77"},
      {file_with({{"x", {2}, 0, Bytes(4)}}), ErrorKind::invalid_argument,
       "tensor 'x': 8 data bytes run past the end (4 left)"},
      {file_with({{"x", {-2}, 0, Bytes(8)}}), ErrorKind::invalid_argument,
       "dimensions are negative"},
      {file_with({{"x", {1 << 30, 1 << 30, 1 << 30}, 0, {}}}), ErrorKind::invalid_argument,
       "more than 2^50 elements"},
      {file_with({{"x", {1, 1, 1, 1, 1}, 0, Bytes(4)}}), ErrorKind::invalid_argument,
       "tensor with 5 dimensions"},
      {file_with({{"x", {}, 0, Bytes(4)}}), ErrorKind::invalid_argument,
       "tensor with 0 dimensions"},
      {file_with({{"x", {1}, 0, Bytes(4)}, {"x", {1}, 0, Bytes(4)}}), ErrorKind::invalid_argument,
       "duplicate tensor name 'x'"},
  };
  for (const auto& c : cases) {
    SCOPED_TRACE(c.message);
    expect_error([&] { parse(c.bytes); }, c.kind, {"[ggml] m.bin", c.message});
  }
}

TEST(GgmlLegacy, TruncationsFailExceptAtRecordBoundaries) {
  const Bytes file = synthetic_file();
  // Tensor records end the file at any boundary: after the vocabulary and after each tensor.
  const size_t header = 4 + 11 * 4 + 8 + 6 * 4 + 4 + (4 + 1) + (4 + 2) + (4 + 0);
  const size_t t0 = 12 + 2 * 4 + 20 + 12, t1 = 12 + 4 + 18 + 8;
  testing::expect_truncations_fail(file, [](const Bytes& b) { parse(b); },
                                   {header, header + t0, header + t0 + t1});
  const Bytes real = testing::read_bytes(testing::data_path("whisper/for-tests-ggml-tiny.bin"));
  testing::expect_truncations_fail(real, [](const Bytes& b) { parse(b); });
}

}  // namespace
}  // namespace parley::io

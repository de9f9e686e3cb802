// safetensors: the real Silero VAD weights, a write/read round trip, and malformed headers.
#include "io/safetensors.h"

#include "engine/alloc_stats.h"
#include "io_test_util.h"

namespace parley::io {
namespace {

using testing::Bytes;
using testing::expect_error;
using ::testing::HasSubstr;

double sum_f32(const Tensor& t) {
  double s = 0;
  for (int64_t i = 0; i < t.numel(); ++i) s += t.data<float>()[i];
  return s;
}

// A header + data file; the header is used as given (no padding).
Bytes make_file(const std::string& header, size_t data_bytes) {
  testing::ByteWriter w;
  w.put<uint64_t>(header.size()).str(header);
  for (size_t i = 0; i < data_bytes; ++i) w.put<uint8_t>(uint8_t(i));
  return w.out();
}

SafetensorsFile parse(const Bytes& b) { return parse_safetensors(b, nullptr, "m.safetensors"); }

TEST(Safetensors, ReadsSileroWeights) {
  const auto f = read_safetensors(testing::data_path("vad/silero_vad_v6.2_16k.safetensors"));
  EXPECT_EQ(f.tensors.size(), 15u);
  EXPECT_TRUE(f.metadata.empty());
  const Tensor& stft = f.tensors.at("test", "stft_conv.weight");
  EXPECT_EQ(stft.shape(), Shape({258, 1, 256}));
  EXPECT_EQ(stft.dtype(), DType::f32);
  // Sums computed with numpy (float64 accumulation) from the same file.
  EXPECT_NEAR(sum_f32(stft), 63.99999985052273, 1e-6);
  const Tensor& w = f.tensors.at("test", "conv1.weight");
  EXPECT_EQ(w.shape(), Shape({128, 129, 3}));
  EXPECT_NEAR(sum_f32(w), -884.1920835400379, 1e-5);
  EXPECT_FLOAT_EQ(w.data<float>()[0], 0.05523581f);
  const Tensor& b = f.tensors.at("test", "final_conv.bias");
  EXPECT_EQ(b.shape(), Shape({1}));
  EXPECT_FLOAT_EQ(b.data<float>()[0], -0.5740388631820679f);
  EXPECT_NEAR(sum_f32(f.tensors.at("test", "lstm_cell.weight_ih")), 670.1897309952063, 1e-5);
}

TEST(Safetensors, ReadIsZeroCopy) {
  const auto before = alloc_stats().host_allocs;
  const auto f = read_safetensors(testing::data_path("vad/silero_vad_v6.2_16k.safetensors"));
  EXPECT_EQ(alloc_stats().host_allocs, before);  // every tensor is a view of the map
}

TensorMap sample_tensors() {
  TensorMap m;
  Tensor a = Tensor::empty({2, 3}, DType::f32);
  for (int i = 0; i < 6; ++i) a.data<float>()[i] = float(i) * 0.5f - 1.0f;
  Tensor h = Tensor::empty({3}, DType::f16);  // 6 bytes: would misalign what follows
  for (int i = 0; i < 3; ++i) h.data<uint16_t>()[i] = f32_to_f16(float(i) + 0.25f);
  Tensor bf = Tensor::empty({1, 1, 2}, DType::bf16);
  bf.data<uint16_t>()[0] = f32_to_bf16(3.5f);
  bf.data<uint16_t>()[1] = f32_to_bf16(-7.0f);
  Tensor i32 = Tensor::empty({4}, DType::i32);
  for (int i = 0; i < 4; ++i) i32.data<int32_t>()[i] = -100000 * i;
  Tensor i8 = Tensor::empty({5}, DType::i8);
  for (int i = 0; i < 5; ++i) i8.data<int8_t>()[i] = int8_t(-3 + i);
  m.insert("test", "a.weight", a);
  m.insert("test", "b.half", h);
  m.insert("test", "c.bf16", bf);
  m.insert("test", "d.ids", i32);
  m.insert("test", "e.bytes", i8);
  m.insert("test", "z.empty", Tensor::empty({0, 4}, DType::f32));
  return m;
}

TEST(Safetensors, WriteThenReadRoundTrips) {
  const TensorMap in = sample_tensors();
  const std::string path = testing::temp_path("roundtrip.safetensors");
  write_safetensors(path, in, {{"format", "pt"}, {"note", "quote \" and é"}});
  const auto out = read_safetensors(path);
  EXPECT_EQ(out.metadata.at("format"), "pt");
  EXPECT_EQ(out.metadata.at("note"), "quote \" and é");
  ASSERT_EQ(out.tensors.size(), in.size());
  for (const auto& [name, t] : in) {
    const Tensor& r = out.tensors.at("test", name);
    EXPECT_EQ(r.shape(), t.shape()) << name;
    EXPECT_EQ(r.dtype(), t.dtype()) << name;
    ASSERT_EQ(r.nbytes(), t.nbytes()) << name;
    if (t.nbytes()) {
      EXPECT_EQ(std::memcmp(r.raw(), t.raw(), t.nbytes()), 0) << name;
      // Laid out by element size first, so every view is aligned.
      EXPECT_EQ(reinterpret_cast<uintptr_t>(r.raw()) % dtype_size(r.dtype()), 0u) << name;
    }
  }
}

TEST(Safetensors, WriterLayoutMatchesTheReference) {
  const Bytes b = serialize_safetensors(sample_tensors(), {{"format", "pt"}});
  uint64_t n;
  std::memcpy(&n, b.data(), 8);
  EXPECT_EQ(n % 8, 0u);
  const std::string header(reinterpret_cast<const char*>(b.data() + 8), n);
  // 4-byte dtypes first (by name), then 2-byte, then 1-byte; padding is spaces.
  EXPECT_THAT(header,
              HasSubstr(R"("a.weight":{"dtype":"F32","shape":[2,3],"data_offsets":[0,24]})"));
  EXPECT_THAT(header, HasSubstr(R"("d.ids":{"dtype":"I32","shape":[4],"data_offsets":[24,40]})"));
  EXPECT_THAT(header,
              HasSubstr(R"("z.empty":{"dtype":"F32","shape":[0,4],"data_offsets":[40,40]})"));
  EXPECT_THAT(header, HasSubstr(R"("b.half":{"dtype":"F16","shape":[3],"data_offsets":[40,46]})"));
  EXPECT_THAT(header,
              HasSubstr(R"("c.bf16":{"dtype":"BF16","shape":[1,1,2],"data_offsets":[46,50]})"));
  EXPECT_THAT(header, HasSubstr(R"("e.bytes":{"dtype":"I8","shape":[5],"data_offsets":[50,55]})"));
  EXPECT_THAT(header, HasSubstr(R"("__metadata__":{"format":"pt"})"));
  EXPECT_EQ(header.substr(header.rfind('}') + 1).find_first_not_of(' '), std::string::npos);
  EXPECT_EQ(b.size(), 8 + n + 55);
}

TEST(Safetensors, ReadsMisalignedDataAsCopies) {
  // Header of 7 bytes + data: the data section starts at 15, misaligned for f32.
  Bytes file = make_file(R"({"x":{"dtype":"F32","shape":[2],"data_offsets":[0,8]}})", 0);
  const float v[2] = {1.5f, -2.25f};
  file.insert(file.end(), reinterpret_cast<const uint8_t*>(v),
              reinterpret_cast<const uint8_t*>(v) + 8);
  const auto f = parse(file);
  const Tensor& t = f.tensors.at("test", "x");
  EXPECT_EQ(reinterpret_cast<uintptr_t>(t.raw()) % 4, 0u);
  EXPECT_EQ(t.data<float>()[0], 1.5f);
  EXPECT_EQ(t.data<float>()[1], -2.25f);
}

TEST(Safetensors, RejectsHeaderLongerThanFile) {
  testing::ByteWriter w;
  w.put<uint64_t>(9'000'000'000'000'000'000ull).str("{}");
  expect_error(
      [&] { parse(w.out()); }, ErrorKind::invalid_argument,
      {"[safetensors] m.safetensors", "header length 9000000000000000000 exceeds file size 10"});
}

TEST(Safetensors, RejectsShortAndEmptyFiles) {
  expect_error([] { parse({}); }, ErrorKind::invalid_argument,
               {"m.safetensors", "file is 0 bytes"});
  expect_error([] { parse({1, 0, 0}); }, ErrorKind::invalid_argument, {"file is 3 bytes"});
  const std::string empty = testing::temp_path("empty.safetensors");
  testing::write_bytes(empty, {});
  expect_error([&] { read_safetensors(empty); }, ErrorKind::invalid_argument,
               {empty, "file is 0 bytes"});
  expect_error([] { read_safetensors("/nonexistent/x.safetensors"); }, ErrorKind::not_found,
               {"/nonexistent/x.safetensors"});
}

struct BadHeader {
  const char* header;
  size_t data_bytes;
  ErrorKind kind;
  const char* message;
};

TEST(Safetensors, RejectsBadEntries) {
  const BadHeader cases[] = {
      {R"({"x":{"dtype":"BOOL","shape":[2],"data_offsets":[0,2]}})", 2, ErrorKind::unsupported,
       "tensor 'x': dtype BOOL is not supported"},
      {R"({"x":{"dtype":"F64","shape":[1],"data_offsets":[0,8]}})", 8, ErrorKind::unsupported,
       "dtype F64 is not supported"},
      {R"({"x":{"dtype":"F32","shape":[2],"data_offsets":[0,8]}})", 4, ErrorKind::invalid_argument,
       "tensor 'x': data_offsets [0, 8] run past the data section (4 bytes)"},
      {R"({"x":{"dtype":"F32","shape":[1],"data_offsets":[8,4]}})", 8, ErrorKind::invalid_argument,
       "data_offsets [8, 4] end before they begin"},
      {R"({"x":{"dtype":"F32","shape":[3],"data_offsets":[0,8]}})", 8, ErrorKind::invalid_argument,
       "span 8 bytes, but F32[3] needs 12"},
      {R"({"x":{"dtype":"F32","shape":[1000000000000,1000000000000],"data_offsets":[0,4]}})", 4,
       ErrorKind::invalid_argument, "shape has more than 2^50 elements"},
      {R"({"x":{"dtype":"I8","shape":[1000000000000],"data_offsets":[0,4]}})", 4,
       ErrorKind::invalid_argument, "needs 1000000000000"},
      {R"({"x":{"dtype":"F32","shape":[-1],"data_offsets":[0,4]}})", 4, ErrorKind::invalid_argument,
       "shape entries must be integers"},
      {R"({"x":{"dtype":"F32","shape":[1.0],"data_offsets":[0,4]}})", 4,
       ErrorKind::invalid_argument, "shape entries must be integers"},
      {R"({"x":{"dtype":"I8","shape":[1,1,1,1,1,1,1],"data_offsets":[0,1]}})", 1,
       ErrorKind::unsupported, "7 dimensions, at most 6"},
      {R"({"x":{"dtype":"F32","shape":[1],"data_offsets":[0]}})", 4, ErrorKind::invalid_argument,
       "not an array of 2 offsets"},
      {R"({"x":{"dtype":"F32","shape":[1],"data_offsets":[0,-4]}})", 4, ErrorKind::invalid_argument,
       "non-negative 64-bit integers"},
      {R"({"x":{"shape":[1],"data_offsets":[0,4]}})", 4, ErrorKind::invalid_argument,
       "missing string \"dtype\""},
      {R"({"x":{"dtype":"F32","data_offsets":[0,4]}})", 4, ErrorKind::invalid_argument,
       "missing array \"shape\""},
      {R"({"x":[]})", 0, ErrorKind::invalid_argument, "tensor 'x': entry is not an object"},
      {R"({"x":{"dtype":"F32","shape":[2],"data_offsets":[0,8]},"y":{"dtype":"F32","shape":[1],"data_offsets":[4,8]}})",
       8, ErrorKind::invalid_argument, "tensors 'x' and 'y' overlap"},
      {R"({"x":{"dtype":"F32","shape":[1],"data_offsets":[0,4]},"x":{"dtype":"F32","shape":[1],"data_offsets":[4,8]}})",
       8, ErrorKind::invalid_argument, "duplicate key \"x\""},
      {R"({"__metadata__":{"a":1}})", 0, ErrorKind::invalid_argument,
       "__metadata__ value 'a' is not a string"},
      {R"({"__metadata__":[]})", 0, ErrorKind::invalid_argument, "__metadata__ is not an object"},
      {R"([])", 0, ErrorKind::invalid_argument, "header does not start with '{'"},
      {R"({"x":1} junk)", 0, ErrorKind::invalid_argument, "invalid JSON"},
      {"{\"x\":\"\xff\"}", 0, ErrorKind::invalid_argument, "invalid UTF-8"},
  };
  for (const auto& c : cases) {
    SCOPED_TRACE(c.header);
    expect_error([&] { parse(make_file(c.header, c.data_bytes)); }, c.kind,
                 {"[safetensors] m.safetensors", c.message});
  }
}

TEST(Safetensors, AcceptsPaddingAndEmptyHeaders) {
  const auto f = parse(make_file("{}      ", 0));
  EXPECT_TRUE(f.tensors.empty());
  const Bytes file =
      make_file(R"({"__metadata__":{},"e":{"dtype":"I8","shape":[0],"data_offsets":[3,3]}}  )", 3);
  const auto g = parse(file);  // the views point into `file`
  EXPECT_EQ(g.tensors.at("t", "e").numel(), 0);
}

TEST(Safetensors, EveryTruncationFails) {
  const Bytes file = serialize_safetensors(sample_tensors(), {{"k", "v"}});
  testing::expect_truncations_fail(file, [](const Bytes& b) { parse(b); });
}

// mlx-whisper saves its alignment_heads parameter as I64 [n, 2]; I64 tensors come back as
// values beside the float tensors.
TEST(Safetensors, ReadsI64AsValues) {
  testing::ByteWriter w;
  const std::string header =
      R"({"alignment_heads":{"dtype":"I64","shape":[2,2],"data_offsets":[0,32]},)"
      R"("w":{"dtype":"F32","shape":[2],"data_offsets":[32,40]}})";
  w.put<uint64_t>(header.size()).str(header);
  for (int64_t v : {3, 0, 3, 5}) w.put<int64_t>(v);
  w.put<float>(1.5f).put<float>(-2.0f);
  const SafetensorsFile f = parse(w.out());
  ASSERT_EQ(f.int64_tensors.count("alignment_heads"), 1u);
  const Int64Array& a = f.int64_tensors.at("alignment_heads");
  EXPECT_EQ(a.shape, Shape({2, 2}));
  EXPECT_EQ(a.values, (std::vector<int64_t>{3, 0, 3, 5}));
  EXPECT_FALSE(f.tensors.contains("alignment_heads"));
  EXPECT_EQ(f.tensors.at("t", "w").data<float>()[1], -2.0f);
  // A wrong byte count is still caught for I64.
  testing::ByteWriter bad;
  const std::string bad_header = R"({"a":{"dtype":"I64","shape":[3],"data_offsets":[0,16]}})";
  bad.put<uint64_t>(bad_header.size()).str(bad_header);
  for (int i = 0; i < 16; ++i) bad.put<uint8_t>(0);
  testing::expect_error([&] { parse(bad.out()); }, ErrorKind::invalid_argument,
                        {"'a'", "I64[3] needs 24"});
}

}  // namespace
}  // namespace parley::io

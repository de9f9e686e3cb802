// GGUF: metadata of every type, tensor views, Q8_0 blocks, and malformed files, on
// fixtures built by GgufBuilder (the shared data has no GGUF file).
#include "io/gguf.h"

#include "engine/alloc_stats.h"
#include "io_test_util.h"

namespace parley::io {
namespace {

using testing::Bytes;
using testing::expect_error;
using testing::GgufBuilder;

GgufFile parse(const Bytes& b) { return parse_gguf(b, nullptr, "m.gguf"); }

Bytes f32_bytes(int n, float scale) {
  std::vector<float> v(static_cast<size_t>(n));
  for (int i = 0; i < n; ++i) v[size_t(i)] = float(i) * scale;
  return testing::as_bytes(v);
}

// Q8_0 blocks: block b has scale 0.5 * (b + 1) and quants (i - 16) for i in 0..31.
Bytes q8_0_bytes(int n_blocks) {
  testing::ByteWriter w;
  for (int b = 0; b < n_blocks; ++b) {
    w.put<uint16_t>(f32_to_f16(0.5f * float(b + 1)));
    for (int i = 0; i < 32; ++i) w.put<int8_t>(int8_t(i - 16));
  }
  return w.out();
}

Bytes all_types_file() {
  using B = GgufBuilder;
  testing::ByteWriter strings;
  for (std::string_view s : {"<s>", "", "héllo"}) strings.put<uint64_t>(s.size()).str(s);
  testing::ByteWriter nested;  // [[1, 2], [3]] as arrays of uint16
  for (const Bytes& a :
       {B::array(2, 2, testing::ByteWriter().put<uint16_t>(1).put<uint16_t>(2).out()),
        B::array(2, 1, testing::ByteWriter().put<uint16_t>(3).out())})
    nested.bytes(a.data(), a.size());
  std::vector<uint16_t> h(8);
  for (int i = 0; i < 8; ++i) h[size_t(i)] = f32_to_f16(float(i) - 2.0f);
  std::vector<uint16_t> bf(6);
  for (int i = 0; i < 6; ++i) bf[size_t(i)] = f32_to_bf16(float(i) * 4.0f);
  return B()
      .kv("u8", 0, B::scalar<uint8_t>(200))
      .kv("i8", 1, B::scalar<int8_t>(-5))
      .kv("u16", 2, B::scalar<uint16_t>(60000))
      .kv("i16", 3, B::scalar<int16_t>(-30000))
      .kv_u32("u32", 4000000000u)
      .kv("i32", 5, B::scalar<int32_t>(-2000000000))
      .kv("f32", 6, B::scalar<float>(1.25f))
      .kv("bool", 7, B::scalar<uint8_t>(1))
      .kv_str("general.architecture", "whisper")
      .kv("u64", 10, B::scalar<uint64_t>(1ull << 40))
      .kv("i64", 11, B::scalar<int64_t>(-(1ll << 40)))
      .kv("f64", 12, B::scalar<double>(-0.125))
      .kv("tokens", 9, B::array(8, 3, strings.out()))
      .kv("scores", 9,
          B::array(6, 2, testing::ByteWriter().put<float>(0.5f).put<float>(-1.f).out()))
      .kv("flags", 9, B::array(7, 3, Bytes{1, 0, 1}))
      .kv("nested", 9, B::array(9, 2, nested.out()))
      .kv("empty", 9, B::array(4, 0, {}))
      .tensor("w.f32", {4, 3}, 0, f32_bytes(12, 0.25f))
      .tensor("w.f16", {8}, 1, testing::as_bytes(h))
      .tensor("w.bf16", {2, 3}, 30, testing::as_bytes(bf))
      .tensor("w.q8", {64, 2}, 8, q8_0_bytes(4))
      .tensor("w.q4", {32}, 2, Bytes(18, 0x11))
      .build();
}

TEST(Gguf, ReadsMetadataOfEveryType) {
  const Bytes file = all_types_file();
  const GgufFile f = parse(file);
  EXPECT_EQ(f.version(), 3u);
  EXPECT_EQ(f.alignment(), 32u);
  EXPECT_EQ(f.metadata().size(), 17u);
  EXPECT_EQ(f.get<uint8_t>("u8"), 200);
  EXPECT_EQ(f.get<int8_t>("i8"), -5);
  EXPECT_EQ(f.get<uint16_t>("u16"), 60000);
  EXPECT_EQ(f.get<int16_t>("i16"), -30000);
  EXPECT_EQ(f.get<uint32_t>("u32"), 4000000000u);
  EXPECT_EQ(f.get<int32_t>("i32"), -2000000000);
  EXPECT_EQ(f.get<float>("f32"), 1.25f);
  EXPECT_EQ(f.get<bool>("bool"), true);
  EXPECT_EQ(f.get<std::string>("general.architecture"), "whisper");
  EXPECT_EQ(f.get<uint64_t>("u64"), 1ull << 40);
  EXPECT_EQ(f.get<int64_t>("i64"), -(1ll << 40));
  EXPECT_EQ(f.get<double>("f64"), -0.125);

  const auto& tokens = f.get<GgufArray>("tokens");
  EXPECT_EQ(tokens.type(), GgufType::string);
  EXPECT_EQ(std::get<std::vector<std::string>>(tokens.items),
            (std::vector<std::string>{"<s>", "", "héllo"}));
  EXPECT_EQ(std::get<std::vector<float>>(f.get<GgufArray>("scores").items),
            (std::vector<float>{0.5f, -1.f}));
  EXPECT_EQ(std::get<std::vector<bool>>(f.get<GgufArray>("flags").items),
            (std::vector<bool>{true, false, true}));
  const auto& nested = std::get<std::vector<GgufArray>>(f.get<GgufArray>("nested").items);
  ASSERT_EQ(nested.size(), 2u);
  EXPECT_EQ(std::get<std::vector<uint16_t>>(nested[0].items), (std::vector<uint16_t>{1, 2}));
  EXPECT_EQ(std::get<std::vector<uint16_t>>(nested[1].items), (std::vector<uint16_t>{3}));
  EXPECT_EQ(f.get<GgufArray>("empty").size(), 0u);
  EXPECT_EQ(f.get<GgufArray>("empty").type(), GgufType::uint32);

  expect_error([&] { f.get<uint32_t>("u8"); }, ErrorKind::invalid_argument,
               {"[gguf] m.gguf", "metadata 'u8' is a uint8, not a uint32"});
  expect_error([&] { f.get<uint32_t>("nope"); }, ErrorKind::not_found, {"no metadata key 'nope'"});
  EXPECT_EQ(f.find("nope"), nullptr);
}

TEST(Gguf, ReadsTensorsAsRowMajorViews) {
  const Bytes file = all_types_file();
  const GgufFile f = parse(file);
  ASSERT_EQ(f.tensors().size(), 5u);
  EXPECT_EQ(f.data_offset() % 32, 0u);

  const auto before = alloc_stats().host_allocs;
  const Tensor w = f.tensor("w.f32");
  EXPECT_EQ(alloc_stats().host_allocs, before);  // a view into the file bytes
  EXPECT_EQ(w.shape(), Shape({3, 4}));           // GGUF ne [4, 3] reversed
  EXPECT_GE(static_cast<const uint8_t*>(w.raw()), file.data());
  EXPECT_EQ(w.data<float>()[4 * 2 + 3], 11 * 0.25f);  // row 2, column 3

  const Tensor h = f.tensor("w.f16");
  EXPECT_EQ(h.shape(), Shape({8}));
  EXPECT_EQ(f16_to_f32(h.data<uint16_t>()[7]), 5.0f);
  const Tensor bf = f.tensor("w.bf16");
  EXPECT_EQ(bf.shape(), Shape({3, 2}));
  EXPECT_EQ(bf.dtype(), DType::bf16);
  EXPECT_EQ(bf16_to_f32(bf.data<uint16_t>()[5]), 20.0f);

  const GgufTensorInfo& q = f.info("w.q8");
  EXPECT_EQ(q.shape, Shape({2, 64}));
  EXPECT_EQ(q.type, uint32_t(GgmlType::q8_0));
  EXPECT_EQ(q.nbytes, 4u * 34u);
  EXPECT_EQ(f.raw("w.q8").size(), 136u);
  const Tensor dq = dequantize_q8_0(f.raw("w.q8"), q.shape);
  EXPECT_EQ(dq.shape(), Shape({2, 64}));
  EXPECT_EQ(dq.data<float>()[0], 0.5f * -16.f);       // block 0
  EXPECT_EQ(dq.data<float>()[32 + 31], 1.0f * 15.f);  // block 1
  EXPECT_EQ(dq.data<float>()[96 + 17], 2.0f * 1.f);   // block 3
  expect_error([&] { f.tensor("w.q8"); }, ErrorKind::unsupported,
               {"[gguf] m.gguf", "tensor 'w.q8' has ggml type q8_0"});
  expect_error([&] { f.tensor("w.q4"); }, ErrorKind::unsupported, {"ggml type q4_0"});
  EXPECT_EQ(f.raw("w.q4").size(), 18u);
  expect_error([&] { f.tensor("nope"); }, ErrorKind::not_found, {"no tensor named 'nope'"});

  const TensorMap m = f.float_tensors();
  EXPECT_EQ(m.size(), 3u);
  EXPECT_TRUE(m.contains("w.bf16"));
}

TEST(Gguf, ReadsFromDiskWithCustomAlignmentAndVersion2) {
  const Bytes file = GgufBuilder(2)
                         .kv_u32("general.alignment", 64)
                         .tensor("a", {3}, 0, f32_bytes(3, 1.f))
                         .tensor("b", {2, 2}, 0, f32_bytes(4, 2.f))
                         .alignment(64)
                         .build();
  const std::string path = testing::temp_path("x.gguf");
  testing::write_bytes(path, file);
  const GgufFile f = read_gguf(path);
  EXPECT_EQ(f.version(), 2u);
  EXPECT_EQ(f.alignment(), 64u);
  EXPECT_EQ(f.info("b").offset, 64u);
  EXPECT_EQ(f.tensor("b").data<float>()[3], 6.f);
  EXPECT_THAT(f.source(), ::testing::HasSubstr(path));
}

TEST(Gguf, ListsUnknownTypesButRefusesTheirData) {
  const Bytes file = GgufBuilder().tensor("x", {4}, 99, Bytes(16, 0)).build();
  const GgufFile f = parse(file);
  EXPECT_EQ(f.info("x").type, 99u);
  expect_error([&] { f.raw("x"); }, ErrorKind::unsupported, {"unknown ggml type 99"});
  expect_error([&] { f.tensor("x"); }, ErrorKind::unsupported, {"type 99"});
}

TEST(Gguf, RejectsMalformedFiles) {
  using B = GgufBuilder;
  struct Case {
    Bytes bytes;
    ErrorKind kind;
    const char* message;
  };
  Bytes huge_counts = B().build();
  std::fill(huge_counts.begin() + 8, huge_counts.begin() + 16, 0x7f);
  Bytes huge_kv = B().build();
  std::fill(huge_kv.begin() + 16, huge_kv.begin() + 24, 0x7f);
  Bytes bad_magic = B().build();
  bad_magic[0] = 'X';
  Bytes big_endian = B().build();
  big_endian[4] = 0, big_endian[7] = 3;
  const Bytes long_string =
      B().kv("s", 8, testing::ByteWriter().put<uint64_t>(1ull << 40).str("ab").out()).build();
  const Bytes long_key = testing::ByteWriter()
                             .str("GGUF")
                             .put<uint32_t>(3)
                             .put<uint64_t>(0)
                             .put<uint64_t>(1)
                             .put<uint64_t>(~0ull)
                             .str("abcdefghijklmno")
                             .out();
  const Bytes huge_array = B().kv("a", 9, B::array(5, 1ull << 60, Bytes(8, 0))).build();
  Bytes deep;  // arrays nested 9 deep
  {
    Bytes inner = B::array(0, 0, {});
    for (int i = 0; i < 9; ++i) inner = B::array(9, 1, inner);
    deep = B().kv("deep", 9, inner).build();
  }
  const Case cases[] = {
      {{}, ErrorKind::invalid_argument, "not a GGUF file (bad magic)"},
      {bad_magic, ErrorKind::invalid_argument, "bad magic"},
      {B(1).build(), ErrorKind::unsupported, "GGUF version 1 is not supported"},
      {B(4).build(), ErrorKind::unsupported, "GGUF version 4"},
      {big_endian, ErrorKind::unsupported, "big-endian"},
      {huge_counts, ErrorKind::invalid_argument, "tensor count 9187201950435737471 is impossible"},
      {huge_kv, ErrorKind::invalid_argument, "metadata count 9187201950435737471 is impossible"},
      {long_string, ErrorKind::invalid_argument, "string length 1099511627776 runs past the end"},
      {long_key, ErrorKind::invalid_argument, "metadata key length 18446744073709551615 runs past"},
      {huge_array, ErrorKind::invalid_argument,
       "array of 1152921504606846976 int32 values cannot fit"},
      {deep, ErrorKind::invalid_argument, "nested deeper than 8"},
      {B().kv("t", 13, B::scalar<uint32_t>(0)).build(), ErrorKind::invalid_argument,
       "unknown metadata type 13"},
      {B().kv("b", 7, B::scalar<uint8_t>(2)).build(), ErrorKind::invalid_argument,
       "bool value 2 is neither 0 nor 1"},
      {B().kv_u32("k", 1).kv_u32("k", 2).build(), ErrorKind::invalid_argument,
       "duplicate metadata key 'k'"},
      {B().kv_str("general.alignment", "32").build(), ErrorKind::invalid_argument,
       "general.alignment is a string, not a uint32"},
      {B().kv_u32("general.alignment", 0).build(), ErrorKind::invalid_argument,
       "general.alignment 0 is not a power of two"},
      {B().kv_u32("general.alignment", 48).build(), ErrorKind::invalid_argument,
       "general.alignment 48 is not a power of two"},
      {B().tensor("x", {1, 1, 1, 1, 1}, 0, Bytes(4)).build(), ErrorKind::invalid_argument,
       "tensor 'x': 5 dimensions, at most 4"},
      {B().tensor("x", {1000000000000, 1000000000000}, 0, Bytes(4)).build(),
       ErrorKind::invalid_argument, "tensor 'x': more than 2^50 elements"},
      {B().tensor("x", {1ull << 63}, 0, Bytes(4)).build(), ErrorKind::invalid_argument,
       "dimension 9223372036854775808 is larger than 2^50"},
      {B().tensor("x", {1000000}, 0, Bytes(4)).build(), ErrorKind::invalid_argument,
       "tensor 'x': data [0, +4000000) runs past the data section (4 bytes)"},
      {B().tensor("x", {40}, 8, Bytes(68)).build(), ErrorKind::invalid_argument,
       "row length 40 is not a multiple of the q8_0 block size 32"},
      {B().tensor("x", {1}, 0, Bytes(4)).tensor("x", {1}, 0, Bytes(4)).build(),
       ErrorKind::invalid_argument, "duplicate tensor name 'x'"},
  };
  for (const auto& c : cases) {
    SCOPED_TRACE(c.message);
    expect_error([&] { parse(c.bytes); }, c.kind, {"[gguf] m.gguf", c.message});
  }
}

// Rewrites the offset of the `index`-th tensor info in a file built by GgufBuilder with no
// metadata: infos start at byte 24; each is name (8 + len), n_dims (4), dims, type (4),
// offset (8).
void set_offset(Bytes& file, const std::vector<std::pair<size_t, size_t>>& name_len_and_dims,
                size_t index, uint64_t offset) {
  size_t pos = 24;
  for (size_t i = 0;; ++i) {
    pos += 8 + name_len_and_dims[i].first + 4 + 8 * name_len_and_dims[i].second + 4;
    if (i == index) break;
    pos += 8;
  }
  std::memcpy(file.data() + pos, &offset, 8);
}

TEST(Gguf, RejectsOverlappingAndMisalignedData) {
  Bytes file =
      GgufBuilder().tensor("a", {16}, 0, Bytes(64)).tensor("b", {16}, 0, Bytes(64)).build();
  set_offset(file, {{1, 1}, {1, 1}}, 1, 32);
  expect_error([&] { parse(file); }, ErrorKind::invalid_argument, {"tensors 'a' and 'b' overlap"});
  set_offset(file, {{1, 1}, {1, 1}}, 1, 66);
  expect_error([&] { parse(file); }, ErrorKind::invalid_argument,
               {"tensor 'b': data offset 66 is not a multiple of the alignment 32"});
}

TEST(Gguf, EveryTruncationFails) {
  const Bytes file = all_types_file();
  testing::expect_truncations_fail(file, [](const Bytes& b) { parse(b); });
}

}  // namespace
}  // namespace parley::io

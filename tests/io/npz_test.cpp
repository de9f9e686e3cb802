// npz and npy: Whisper's real mel filter archive, synthetic archives (stored, deflated,
// ZIP64), the .npy writer, and malformed archives and arrays.
#include "io/npz.h"

#include "io/npy.h"
#include "io_test_util.h"

namespace parley::io {
namespace {

using testing::Bytes;
using testing::expect_error;
using testing::ZipEntrySpec;

double sum_f32(const Tensor& t) {
  double s = 0;
  for (int64_t i = 0; i < t.numel(); ++i) s += t.data<float>()[i];
  return s;
}
float at2(const Tensor& t, int64_t r, int64_t c) { return t.data<float>()[r * t.dim(1) + c]; }

// An .npy image with the given header dict (padded to 64 bytes like numpy) and data bytes.
Bytes make_npy(const std::string& dict, size_t data_bytes, uint8_t major = 1) {
  testing::ByteWriter w;
  const size_t prefix = major == 1 ? 10 : 12;
  std::string h = dict;
  const size_t total = (prefix + h.size() + 1 + 63) / 64 * 64;
  h.resize(total - prefix - 1, ' ');
  h += '\n';
  w.put<uint8_t>(0x93).str("NUMPY").put<uint8_t>(major).put<uint8_t>(0);
  if (major == 1)
    w.put<uint16_t>(uint16_t(h.size()));
  else
    w.put<uint32_t>(uint32_t(h.size()));
  w.str(h);
  for (size_t i = 0; i < data_bytes; ++i) w.put<uint8_t>(uint8_t(i * 7));
  return w.out();
}

Tensor parse_npy_bytes(const Bytes& b) { return parse_npy(b, nullptr, "[npy] a.npy"); }
TensorMap parse_zip(const Bytes& b, NpzOptions o = {}) { return parse_npz(b, nullptr, "f.npz", o); }

TEST(Npz, ReadsWhisperMelFilters) {
  // numpy's savez_compressed: deflated entries with ZIP64 extra fields in the local headers.
  const TensorMap m = read_npz(testing::data_path("whisper/mel_filters.npz"));
  ASSERT_EQ(m.size(), 2u);
  const Tensor& mel80 = m.at("test", "mel_80");
  const Tensor& mel128 = m.at("test", "mel_128");
  EXPECT_EQ(mel80.shape(), Shape({80, 201}));
  EXPECT_EQ(mel128.shape(), Shape({128, 201}));
  EXPECT_EQ(mel80.dtype(), DType::f32);
  // Reference values from numpy (np.load; sums in float64).
  EXPECT_NEAR(sum_f32(mel80), 1.999024092387117, 1e-6);
  EXPECT_NEAR(sum_f32(mel128), 3.1909855409403463, 1e-6);
  EXPECT_FLOAT_EQ(at2(mel80, 0, 1), 0.02486259490251541f);
  EXPECT_FLOAT_EQ(at2(mel80, 1, 2), 0.022871771827340126f);
  EXPECT_FLOAT_EQ(at2(mel80, 40, 43), 0.014735566452145576f);
  EXPECT_FLOAT_EQ(at2(mel80, 79, 186), 0.000366741674952209f);
  EXPECT_EQ(at2(mel80, 40, 60), 0.0f);
  EXPECT_FLOAT_EQ(at2(mel128, 40, 24), 0.040376365184783936f);
  EXPECT_FLOAT_EQ(at2(mel128, 127, 195), at2(mel128, 127, 195));
  float max127 = 0;
  for (int64_t c = 0; c < 201; ++c) max127 = std::max(max127, at2(mel128, 127, c));
  EXPECT_FLOAT_EQ(max127, 0.005041601601988077f);
}

Tensor arange_f32(const Shape& s) {
  Tensor t = Tensor::empty(s, DType::f32);
  for (int64_t i = 0; i < t.numel(); ++i) t.data<float>()[i] = float(i) * 0.5f;
  return t;
}

TEST(Npz, ReadsStoredDeflatedAndZip64Entries) {
  const Bytes a = serialize_npy(arange_f32({3, 4}));
  Tensor ids = Tensor::empty({5}, DType::i32);
  for (int i = 0; i < 5; ++i) ids.data<int32_t>()[i] = i * i - 3;
  const Bytes b = serialize_npy(ids);
  const Bytes zip = testing::build_zip({{"a.npy", a, false, false},
                                        {"dir/", {}, false, false},
                                        {"b.npy", b, true, true},
                                        {"readme.txt", {'h', 'i'}, false, false}},
                                       /*zip64_end=*/true, "a comment");
  const TensorMap m = parse_zip(zip);
  ASSERT_EQ(m.size(), 2u);
  const Tensor& ta = m.at("t", "a");
  EXPECT_EQ(ta.shape(), Shape({3, 4}));
  EXPECT_EQ(ta.data<float>()[11], 5.5f);
  const Tensor& tb = m.at("t", "b");
  EXPECT_EQ(tb.dtype(), DType::i32);
  EXPECT_EQ(tb.data<int32_t>()[4], 13);
}

TEST(Npz, DeflatedEntriesOutliveTheInput) {
  Bytes zip = testing::build_zip({{"x.npy", serialize_npy(arange_f32({100})), true, false}});
  const TensorMap m = parse_zip(zip);
  std::fill(zip.begin(), zip.end(), 0);  // the tensor owns its inflated memory
  EXPECT_EQ(m.at("t", "x").data<float>()[99], 49.5f);
}

TEST(Npz, RejectsMalformedArchives) {
  const Bytes npy = serialize_npy(arange_f32({4}));
  const Bytes good = testing::build_zip({{"x.npy", npy, true, false}});
  expect_error([] { parse_zip({}); }, ErrorKind::invalid_argument,
               {"[npz] f.npz", "too short for a zip archive"});
  expect_error([&] { parse_zip(Bytes(100, 0)); }, ErrorKind::invalid_argument,
               {"[npz] f.npz", "not a zip archive"});

  Bytes crc = good;
  crc[14] ^= 1;  // local header CRC is unused; flip the central directory's instead
  const size_t cd = good.size() - 22 - 46 - 5;
  crc[cd + 16] ^= 1;
  expect_error([&] { parse_zip(crc); }, ErrorKind::invalid_argument,
               {"f.npz: x.npy", "CRC-32 mismatch"});
  EXPECT_NO_THROW(parse_zip(crc, NpzOptions{.verify_crc = false}));

  Bytes method = good;
  method[cd + 10] = 12;  // bzip2
  expect_error([&] { parse_zip(method); }, ErrorKind::unsupported,
               {"x.npy", "compression method 12"});
  Bytes encrypted = good;
  encrypted[cd + 8] = 1;
  expect_error([&] { parse_zip(encrypted); }, ErrorKind::unsupported, {"encrypted"});
  Bytes usize = good;
  usize[cd + 24 + 3] = 0x7f;  // claims ~2 GB from a few hundred bytes
  expect_error([&] { parse_zip(usize); }, ErrorKind::invalid_argument, {"cannot inflate from"});
  Bytes usize_small = good;
  usize_small[cd + 24] -= 1;
  expect_error([&] { parse_zip(usize_small); }, ErrorKind::invalid_argument,
               {"x.npy", "corrupt deflate"});
  Bytes offset = good;
  offset[cd + 42] = 0xf0;
  expect_error([&] { parse_zip(offset); }, ErrorKind::invalid_argument, {"local header offset"});
  Bytes csize = good;
  csize[cd + 20 + 2] = 0x10;  // compressed size past the end
  expect_error([&] { parse_zip(csize); }, ErrorKind::invalid_argument, {"run past the end"});
  Bytes entries = good;
  entries[good.size() - 22 + 10] = 200;
  entries[good.size() - 22 + 8] = 200;
  expect_error([&] { parse_zip(entries); }, ErrorKind::invalid_argument,
               {"200 entries cannot fit"});
  Bytes disks = good;
  disks[good.size() - 22 + 4] = 1;
  expect_error([&] { parse_zip(disks); }, ErrorKind::unsupported, {"multi-disk"});

  const Bytes twice =
      testing::build_zip({{"x.npy", npy, false, false}, {"x.npy", npy, true, false}});
  expect_error([&] { parse_zip(twice); }, ErrorKind::invalid_argument,
               {"duplicate tensor name 'x'"});

  Bytes zip64 = testing::build_zip({{"x.npy", npy, false, true}});
  // Drop the ZIP64 extra's id so the 0xFFFFFFFF sizes have no 64-bit values.
  const size_t cd64 = zip64.size() - 22 - (46 + 5 + 28);
  zip64[cd64 + 46 + 5] = 0x99;
  expect_error([&] { parse_zip(zip64); }, ErrorKind::invalid_argument, {"no ZIP64 extra field"});
}

TEST(Npz, EveryTruncationFails) {
  const Bytes zip = testing::build_zip({{"a.npy", serialize_npy(arange_f32({2, 3})), false, false},
                                        {"b.npy", serialize_npy(arange_f32({7})), true, true}},
                                       true);
  testing::expect_truncations_fail(zip, [](const Bytes& b) { parse_zip(b); });
  const Bytes real = testing::read_bytes(testing::data_path("whisper/mel_filters.npz"));
  testing::expect_truncations_fail(real, [](const Bytes& b) { parse_zip(b); });
}

TEST(Npy, WriteThenReadRoundTrips) {
  const std::string path = testing::temp_path("x.npy");
  const Tensor t = arange_f32({2, 3, 4});
  write_npy(path, t);
  const Tensor r = read_npy(path);
  EXPECT_EQ(r.shape(), t.shape());
  EXPECT_EQ(std::memcmp(r.raw(), t.raw(), t.nbytes()), 0);

  const Bytes b = testing::read_bytes(path);
  const std::string header(b.begin() + 10, b.begin() + 10 + (b[8] | b[9] << 8));
  EXPECT_EQ(header.substr(0, 63),
            "{'descr': '<f4', 'fortran_order': False, 'shape': (2, 3, 4), }"
            " ");
  EXPECT_EQ((10 + header.size()) % 64, 0u);
  EXPECT_EQ(header.back(), '\n');
}

TEST(Npy, WritesEveryDtype) {
  Tensor h = Tensor::empty({3}, DType::f16);
  Tensor bf = Tensor::empty({2}, DType::bf16);
  Tensor i8 = Tensor::empty({}, DType::i8);
  for (int i = 0; i < 3; ++i) h.data<uint16_t>()[i] = f32_to_f16(float(i) - 0.5f);
  bf.data<uint16_t>()[0] = f32_to_bf16(1.5f);
  bf.data<uint16_t>()[1] = f32_to_bf16(-3.0f);
  i8.data<int8_t>()[0] = -5;

  // parse_npy with a null owner views its input: keep the bytes alive.
  const Bytes bh = serialize_npy(h), bbf = serialize_npy(bf);
  const Tensor rh = parse_npy_bytes(bh);
  EXPECT_EQ(rh.dtype(), DType::f16);
  EXPECT_EQ(f16_to_f32(rh.data<uint16_t>()[2]), 1.5f);
  const Tensor rbf = parse_npy_bytes(bbf);  // widened: numpy has no bf16
  EXPECT_EQ(rbf.dtype(), DType::f32);
  EXPECT_EQ(rbf.data<float>()[1], -3.0f);
  const Bytes b1 = serialize_npy(i8);
  const Tensor r8 = parse_npy_bytes(b1);
  EXPECT_EQ(r8.ndim(), 0);
  EXPECT_EQ(r8.data<int8_t>()[0], -5);
  EXPECT_NE(std::string(b1.begin(), b1.end()).find("'descr': '|i1'"), std::string::npos);
  EXPECT_NE(std::string(b1.begin(), b1.end()).find("'shape': ()"), std::string::npos);
  const Bytes b3 = serialize_npy(h);
  EXPECT_NE(std::string(b3.begin(), b3.end()).find("'shape': (3,)"), std::string::npos);
}

TEST(Npy, ParsesHeaderVariants) {
  EXPECT_EQ(
      parse_npy_bytes(make_npy("{'descr': '<i4', 'fortran_order': False, 'shape': (2, 3)}", 24))
          .shape(),
      Shape({2, 3}));
  EXPECT_EQ(parse_npy_bytes(
                make_npy("{\"shape\": (3L,), \"fortran_order\": True, \"descr\": \"<f2\",}", 6, 2))
                .shape(),
            Shape({3}));
  EXPECT_EQ(parse_npy_bytes(make_npy("{'descr':'|i1','fortran_order':False,'shape':(0, 5),}", 0, 3))
                .numel(),
            0);
}

TEST(Npy, RejectsMalformedArrays) {
  struct Case {
    Bytes bytes;
    ErrorKind kind;
    const char* message;
  };
  const std::string ok = "'fortran_order': False, 'shape': (2,)";
  const Case cases[] = {
      {{}, ErrorKind::invalid_argument, "bad magic"},
      {make_npy("{'descr': '<f8', " + ok + "}", 16), ErrorKind::unsupported,
       "dtype '<f8' is not supported"},
      {make_npy("{'descr': '>f4', " + ok + "}", 8), ErrorKind::unsupported, "dtype '>f4'"},
      {make_npy("{'descr': '|b1', " + ok + "}", 2), ErrorKind::unsupported, "dtype '|b1'"},
      {make_npy("{'descr': [('a', '<f4')], " + ok + "}", 8), ErrorKind::unsupported, "structured"},
      {make_npy("{'descr': '<f4', 'fortran_order': True, 'shape': (2, 2)}", 16),
       ErrorKind::unsupported, "fortran_order"},
      {make_npy("{'descr': '<f4', " + ok + "}", 4), ErrorKind::invalid_argument,
       "f32[2] needs 8 data bytes, found 4"},
      {make_npy("{'descr': '<f4', " + ok + "}", 12), ErrorKind::invalid_argument, "found 12"},
      {make_npy("{'descr': '<f4', 'fortran_order': False, 'shape': (1000000000000, 1000000000000)}",
                0),
       ErrorKind::invalid_argument, "more than 2^50 elements"},
      {make_npy("{'descr': '<f4', 'fortran_order': False, 'shape': (99999999999999999999,)}", 0),
       ErrorKind::invalid_argument, "dimension too large"},
      {make_npy("{'descr': '<f4', 'fortran_order': False, 'shape': (-1,)}", 0),
       ErrorKind::invalid_argument, "expected a non-negative integer"},
      {make_npy("{'descr': '<f4', 'fortran_order': False, 'shape': (1,1,1,1,1,1,1)}", 4),
       ErrorKind::unsupported, "more than 6 dimensions"},
      {make_npy("{'descr': '<f4', " + ok + ", 'extra': 1}", 8), ErrorKind::invalid_argument,
       "unexpected key 'extra'"},
      {make_npy("{'descr': '<f4', 'descr': '<f4', " + ok + "}", 8), ErrorKind::invalid_argument,
       "duplicate key 'descr'"},
      {make_npy("{'descr': '<f4', 'shape': (2,)}", 8), ErrorKind::invalid_argument,
       "needs the keys"},
      {make_npy("{'descr': '<f4', " + ok + "} x", 8), ErrorKind::invalid_argument,
       "unexpected text"},
      {make_npy("{'descr': '<f4', 'fortran_order': Maybe, 'shape': (2,)}", 8),
       ErrorKind::invalid_argument, "expected True or False"},
      {make_npy("{'descr': '<f4, " + ok + "}", 8), ErrorKind::invalid_argument, "bad header"},
      {make_npy("{'descr': '<f4', " + ok + "}", 8, 4), ErrorKind::unsupported, "version 4.0"},
  };
  for (const auto& c : cases)
    expect_error([&] { parse_npy_bytes(c.bytes); }, c.kind, {"[npy] a.npy", c.message});
  Bytes long_header = make_npy("{'descr': '<f4', " + ok + "}", 8);
  long_header[8] = 0xff;
  long_header[9] = 0xff;
  expect_error([&] { parse_npy_bytes(long_header); }, ErrorKind::invalid_argument,
               {"header length 65535 runs past the end"});
}

TEST(Npy, EveryTruncationFails) {
  const Bytes b = serialize_npy(arange_f32({3, 5}));
  testing::expect_truncations_fail(b, [](const Bytes& x) { parse_npy_bytes(x); });
}

// np.savez of np.asarray(mask.nonzero()).T (mlx-whisper's alignment_heads) writes an int64
// array in fortran_order; with NpzOptions::int64_arrays it comes back row-major.
TEST(Npz, ReadsInt64ArraysWhenAsked) {
  Bytes c = make_npy("{'descr': '<i8', 'fortran_order': False, 'shape': (2, 2), }", 0);
  Bytes f = make_npy("{'descr': '<i8', 'fortran_order': True, 'shape': (2, 3), }", 0);
  for (int64_t v : {1, 2, 3, 4}) {
    const auto* p = reinterpret_cast<const uint8_t*>(&v);
    c.insert(c.end(), p, p + 8);
  }
  // Column-major [[1, 2, 3], [4, 5, 6]].
  for (int64_t v : {1, 4, 2, 5, 3, 6}) {
    const auto* p = reinterpret_cast<const uint8_t*>(&v);
    f.insert(f.end(), p, p + 8);
  }
  const Bytes w = serialize_npy(arange_f32({2}));
  const Bytes zip = testing::build_zip(
      {{"c.npy", c, false, false}, {"f.npy", f, true, false}, {"w.npy", w, false, false}});
  testing::expect_error([&] { parse_zip(zip); }, ErrorKind::unsupported, {"'<i8'"});
  std::map<std::string, Int64Array> int64;
  NpzOptions o;
  o.int64_arrays = &int64;
  const TensorMap m = parse_zip(zip, o);
  EXPECT_EQ(m.size(), 1u);
  ASSERT_EQ(int64.size(), 2u);
  EXPECT_EQ(int64.at("c").values, (std::vector<int64_t>{1, 2, 3, 4}));
  EXPECT_EQ(int64.at("f").shape, Shape({2, 3}));
  EXPECT_EQ(int64.at("f").values, (std::vector<int64_t>{1, 2, 3, 4, 5, 6}));
}

}  // namespace
}  // namespace parley::io

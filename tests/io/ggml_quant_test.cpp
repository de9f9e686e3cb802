// io::dequantize_ggml and ggml_quant_matrix (io/ggml_types.h): their checks, agreement with
// dequantize_q8_0, and the live comparison against the gguf package's codec
// (GgmlQuantLive.MatchesGguf, driven by tests/parity/quant_dequant_test.py, which writes
// the files it reads; skipped when PARLEY_GGUF_QUANT_DIR is unset).
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <iterator>
#include <sstream>
#include <string>
#include <vector>

#include "engine/error.h"
#include "io/ggml_types.h"

namespace parley::io {
namespace {

std::vector<uint8_t> read_bytes(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  EXPECT_TRUE(f.good()) << path;
  return {std::istreambuf_iterator<char>(f), std::istreambuf_iterator<char>()};
}

template <typename Fn>
void expect_error(Fn&& fn, ErrorKind kind, const std::string& part) {
  try {
    fn();
    ADD_FAILURE() << "no error; expected one containing " << part;
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), kind) << e.what();
    EXPECT_NE(std::string(e.what()).find(part), std::string::npos) << e.what();
  }
}

TEST(GgmlQuant, Q8_0AgreesWithDequantizeGgml) {
  std::vector<uint8_t> blocks(34 * 4);
  for (size_t i = 0; i < blocks.size(); ++i) blocks[i] = uint8_t(i * 37 + 11);
  for (size_t b = 0; b < 4; ++b) {  // finite scales
    const uint16_t h = f32_to_f16(0.01f * float(b + 1));
    std::memcpy(&blocks[b * 34], &h, 2);
  }
  const Tensor x = dequantize_q8_0(blocks, {2, 64});
  const Tensor y = dequantize_ggml(uint32_t(GgmlType::q8_0), blocks, {2, 64});
  ASSERT_EQ(x.shape(), y.shape());
  EXPECT_EQ(std::memcmp(x.raw(), y.raw(), x.nbytes()), 0);
  // Value 1 of block 0 is byte 3: q = 3 * 37 + 11 = 122, d = f16(0.01).
  EXPECT_EQ(x.data<float>()[1], 122.0f * f16_to_f32(f32_to_f16(0.01f)));
}

TEST(GgmlQuant, QuantMatrixViewsRows) {
  std::vector<uint8_t> blocks(144 * 6);
  auto owner = std::make_shared<int>(0);
  const QuantMatrix m = ggml_quant_matrix(uint32_t(GgmlType::q4_k), {3, 512}, blocks, owner);
  EXPECT_EQ(m.type, QuantType::q4_k);
  EXPECT_EQ(m.rows, 3);
  EXPECT_EQ(m.cols, 512);
  EXPECT_EQ(m.row_bytes(), 288);
  EXPECT_EQ(m.data, blocks.data());
  EXPECT_EQ(m.describe(), "q4_K[3, 512] cpu");
  EXPECT_EQ(owner.use_count(), 2);  // the matrix keeps its owner alive
}

TEST(GgmlQuant, BadInput) {
  std::vector<uint8_t> blocks(144 * 2);
  expect_error([&] { dequantize_ggml(uint32_t(GgmlType::iq2_xs), blocks, {256}); },
               ErrorKind::unsupported, "ggml type iq2_xs is not a supported");
  expect_error([&] { dequantize_ggml(uint32_t(GgmlType::f16), blocks, {256}); },
               ErrorKind::unsupported, "[dequantize f16]");
  expect_error(
      [&] {
        dequantize_ggml(uint32_t(GgmlType::q4_k), blocks, {2, 200});
      },
      ErrorKind::invalid_argument, "multiple of the block size 256");
  expect_error(
      [&] {
        dequantize_ggml(uint32_t(GgmlType::q4_k), blocks, {3, 256});
      },
      ErrorKind::invalid_argument, "[dequantize q4_K] q4_K[3, 256] needs 432 bytes, got 288");
  expect_error(
      [&] {
        ggml_quant_matrix(uint32_t(GgmlType::q6_k), {4, 256}, blocks, nullptr);
      },
      ErrorKind::invalid_argument, "[ggml_quant_matrix]");
}

// Each manifest line: name ggml_type rows cols; name.blocks and name.f32 beside it.
TEST(GgmlQuantLive, MatchesGguf) {
  const char* dir = std::getenv("PARLEY_GGUF_QUANT_DIR");
  if (!dir) GTEST_SKIP() << "run by tests/parity/quant_dequant_test.py";
  std::ifstream manifest(std::string(dir) + "/manifest.txt");
  ASSERT_TRUE(manifest.good());
  std::string line;
  int files = 0;
  while (std::getline(manifest, line)) {
    std::istringstream in(line);
    std::string name;
    uint32_t type = 0;
    int64_t rows = 0, cols = 0;
    if (!(in >> name >> type >> rows >> cols)) continue;
    SCOPED_TRACE(name);
    const std::vector<uint8_t> blocks = read_bytes(std::string(dir) + "/" + name + ".blocks");
    const std::vector<uint8_t> want = read_bytes(std::string(dir) + "/" + name + ".f32");
    const Tensor got = dequantize_ggml(type, blocks, {rows, cols});
    ASSERT_EQ(want.size(), got.nbytes());
    int64_t mismatches = 0;
    double max_diff = 0;
    for (int64_t i = 0; i < got.numel(); ++i) {
      float w;
      std::memcpy(&w, want.data() + 4 * i, 4);
      const float g = got.data<float>()[i];
      if (std::memcmp(&w, &g, 4) != 0) {
        ++mismatches;
        max_diff = std::max(max_diff, std::fabs(double(w) - g));
      }
    }
    std::printf("  %-16s %6lld values: %lld differ from gguf, max |diff| %g\n", name.c_str(),
                (long long)got.numel(), (long long)mismatches, max_diff);
    EXPECT_EQ(mismatches, 0);
    ++files;
  }
  EXPECT_GE(files, 10);
}

}  // namespace
}  // namespace parley::io

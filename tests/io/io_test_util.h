// Helpers for the io tests: error expectations, temp files, and tiny writers that build
// fixture files byte by byte (GGUF, whisper.cpp ggml .bin, zip), since the shared data has
// no GGUF file and no ggml file with tensors.
#pragma once

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <zlib.h>

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <string>
#include <string_view>
#include <vector>

#include "engine/error.h"

namespace parley::io::testing {

using Bytes = std::vector<uint8_t>;

inline std::string data_path(const std::string& rel) {
  return std::string(PARLEY_TEST_DATA) + "/" + rel;
}

inline std::string temp_path(const std::string& name) {
  return (std::filesystem::path(::testing::TempDir()) / ("parley_io_" + name)).string();
}

inline void write_bytes(const std::string& path, const Bytes& b) {
  std::ofstream f(path, std::ios::binary | std::ios::trunc);
  f.write(reinterpret_cast<const char*>(b.data()), std::streamsize(b.size()));
  ASSERT_TRUE(f.good()) << path;
}

inline Bytes read_bytes(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  return Bytes(std::istreambuf_iterator<char>(f), {});
}

// Runs fn, expecting a parley::Error of `kind` whose message contains every substring.
inline void expect_error(const std::function<void()>& fn, ErrorKind kind,
                         std::initializer_list<std::string_view> substrings) {
  try {
    fn();
    ADD_FAILURE() << "no parley::Error thrown";
  } catch (const Error& e) {
    EXPECT_EQ(to_string(e.kind()), to_string(kind)) << e.what();
    for (std::string_view s : substrings)
      EXPECT_THAT(e.what(), ::testing::HasSubstr(std::string(s)));
  }
}

// Little-endian byte appender.
class ByteWriter {
 public:
  template <typename T>
  ByteWriter& put(T v) {
    const auto* p = reinterpret_cast<const uint8_t*>(&v);
    b_.insert(b_.end(), p, p + sizeof(T));
    return *this;
  }
  ByteWriter& bytes(const void* data, size_t n) {
    const auto* p = static_cast<const uint8_t*>(data);
    b_.insert(b_.end(), p, p + n);
    return *this;
  }
  ByteWriter& str(std::string_view s) { return bytes(s.data(), s.size()); }
  ByteWriter& pad_to(size_t align, uint8_t fill = 0) {
    while (b_.size() % align) b_.push_back(fill);
    return *this;
  }
  size_t size() const { return b_.size(); }
  Bytes& out() { return b_; }

 private:
  Bytes b_;
};

template <typename T>
Bytes as_bytes(const std::vector<T>& v) {
  Bytes b(v.size() * sizeof(T));
  if (!b.empty()) std::memcpy(b.data(), v.data(), b.size());
  return b;
}

// GGUF v3 writer for fixtures: metadata pairs (raw value bytes) and tensors laid out at
// aligned offsets in insertion order.
class GgufBuilder {
 public:
  explicit GgufBuilder(uint32_t version = 3) : version_(version) {}

  // A metadata pair with its value already encoded (use the helpers below).
  GgufBuilder& kv(std::string_view key, uint32_t type, const Bytes& value) {
    kv_.push_back({std::string(key), type, value});
    return *this;
  }
  GgufBuilder& kv_u32(std::string_view key, uint32_t v) { return kv(key, 4, scalar(v)); }
  GgufBuilder& kv_str(std::string_view key, std::string_view v) { return kv(key, 8, string(v)); }
  // `ne` innermost first, as GGUF stores dims.
  GgufBuilder& tensor(std::string_view name, std::vector<uint64_t> ne, uint32_t type,
                      const Bytes& data) {
    tensors_.push_back({std::string(name), std::move(ne), type, data});
    return *this;
  }
  GgufBuilder& alignment(uint64_t a) {
    alignment_ = a;
    return *this;
  }

  Bytes build() const {
    ByteWriter w;
    w.str("GGUF").put<uint32_t>(version_).put<uint64_t>(tensors_.size()).put<uint64_t>(kv_.size());
    for (const auto& k : kv_) {
      w.put<uint64_t>(k.key.size()).str(k.key).put<uint32_t>(k.type);
      w.bytes(k.value.data(), k.value.size());
    }
    uint64_t offset = 0;
    std::vector<uint64_t> offsets;
    for (const auto& t : tensors_) {
      w.put<uint64_t>(t.name.size()).str(t.name).put<uint32_t>(uint32_t(t.ne.size()));
      for (uint64_t d : t.ne) w.put<uint64_t>(d);
      w.put<uint32_t>(t.type).put<uint64_t>(offset);
      offsets.push_back(offset);
      offset = (offset + t.data.size() + alignment_ - 1) / alignment_ * alignment_;
    }
    w.pad_to(alignment_);
    const size_t data_start = w.size();
    for (size_t i = 0; i < tensors_.size(); ++i) {
      while (w.size() < data_start + offsets[i]) w.put<uint8_t>(0);
      w.bytes(tensors_[i].data.data(), tensors_[i].data.size());
    }
    return w.out();
  }

  template <typename T>
  static Bytes scalar(T v) {
    return ByteWriter().put(v).out();
  }
  static Bytes string(std::string_view s) {
    return ByteWriter().put<uint64_t>(s.size()).str(s).out();
  }
  // An array value: element type, count, then the encoded elements back to back.
  static Bytes array(uint32_t elem_type, uint64_t count, const Bytes& elems) {
    ByteWriter w;
    w.put<uint32_t>(elem_type).put<uint64_t>(count).bytes(elems.data(), elems.size());
    return w.out();
  }

 private:
  struct Kv {
    std::string key;
    uint32_t type;
    Bytes value;
  };
  struct T {
    std::string name;
    std::vector<uint64_t> ne;
    uint32_t type;
    Bytes data;
  };
  uint32_t version_;
  uint64_t alignment_ = 32;
  std::vector<Kv> kv_;
  std::vector<T> tensors_;
};

// whisper.cpp legacy .bin writer: hparams, filters, vocab, then tensor records.
struct GgmlTensorSpec {
  std::string name;
  std::vector<int32_t> ne;  // innermost first
  int32_t type;             // 0 f32, 1 f16
  Bytes data;
};

inline Bytes build_ggml(const std::vector<int32_t>& hparams, int32_t n_mel, int32_t n_fft,
                        const std::vector<float>& filters, const std::vector<std::string>& vocab,
                        const std::vector<GgmlTensorSpec>& tensors) {
  ByteWriter w;
  w.put<uint32_t>(0x67676d6c);
  for (int32_t h : hparams) w.put(h);
  w.put(n_mel).put(n_fft).bytes(filters.data(), filters.size() * 4);
  w.put<int32_t>(int32_t(vocab.size()));
  for (const auto& t : vocab) w.put<uint32_t>(uint32_t(t.size())).str(t);
  for (const auto& t : tensors) {
    w.put<int32_t>(int32_t(t.ne.size())).put<int32_t>(int32_t(t.name.size())).put(t.type);
    for (int32_t d : t.ne) w.put(d);
    w.str(t.name).bytes(t.data.data(), t.data.size());
  }
  return w.out();
}

// Raw deflate (window bits -15), as zip method 8 stores it.
inline Bytes deflate_raw(const Bytes& in) {
  z_stream zs{};
  EXPECT_EQ(deflateInit2(&zs, 9, Z_DEFLATED, -15, 8, Z_DEFAULT_STRATEGY), Z_OK);
  Bytes out(deflateBound(&zs, uLong(in.size())));
  zs.next_in = const_cast<Bytef*>(in.data());
  zs.avail_in = uInt(in.size());
  zs.next_out = out.data();
  zs.avail_out = uInt(out.size());
  EXPECT_EQ(deflate(&zs, Z_FINISH), Z_STREAM_END);
  out.resize(zs.total_out);
  deflateEnd(&zs);
  return out;
}

// A zip archive writer: each entry stored or deflated, optionally with ZIP64 fields
// (sizes and offset 0xFFFFFFFF in the central directory, real values in the extra field,
// plus the ZIP64 end records), like Python's zipfile with force_zip64.
struct ZipEntrySpec {
  std::string name;
  Bytes data;  // uncompressed
  bool deflate = false;
  bool zip64 = false;
};

inline Bytes build_zip(const std::vector<ZipEntrySpec>& entries, bool zip64_end = false,
                       std::string_view comment = "") {
  ByteWriter w;
  ByteWriter cd;
  for (const auto& e : entries) {
    const Bytes payload = e.deflate ? deflate_raw(e.data) : e.data;
    const uint32_t crc = uint32_t(crc32(crc32(0, Z_NULL, 0), e.data.data(), uInt(e.data.size())));
    const uint32_t offset = uint32_t(w.size());
    const uint16_t method = e.deflate ? 8 : 0;
    ByteWriter extra;
    if (e.zip64)
      extra.put<uint16_t>(1)
          .put<uint16_t>(16)
          .put<uint64_t>(e.data.size())
          .put<uint64_t>(payload.size());
    w.put<uint32_t>(0x04034b50).put<uint16_t>(45).put<uint16_t>(0).put<uint16_t>(method);
    w.put<uint32_t>(0).put<uint32_t>(crc);
    w.put<uint32_t>(e.zip64 ? 0xffffffffu : uint32_t(payload.size()));
    w.put<uint32_t>(e.zip64 ? 0xffffffffu : uint32_t(e.data.size()));
    w.put<uint16_t>(uint16_t(e.name.size())).put<uint16_t>(uint16_t(extra.size()));
    w.str(e.name).bytes(extra.out().data(), extra.size()).bytes(payload.data(), payload.size());

    ByteWriter cextra;
    if (e.zip64)
      cextra.put<uint16_t>(1)
          .put<uint16_t>(24)
          .put<uint64_t>(e.data.size())
          .put<uint64_t>(payload.size())
          .put<uint64_t>(offset);
    cd.put<uint32_t>(0x02014b50)
        .put<uint16_t>(45)
        .put<uint16_t>(45)
        .put<uint16_t>(0)
        .put<uint16_t>(method);
    cd.put<uint32_t>(0).put<uint32_t>(crc);
    cd.put<uint32_t>(e.zip64 ? 0xffffffffu : uint32_t(payload.size()));
    cd.put<uint32_t>(e.zip64 ? 0xffffffffu : uint32_t(e.data.size()));
    cd.put<uint16_t>(uint16_t(e.name.size()))
        .put<uint16_t>(uint16_t(cextra.size()))
        .put<uint16_t>(0);
    cd.put<uint16_t>(0).put<uint16_t>(0).put<uint32_t>(0);
    cd.put<uint32_t>(e.zip64 ? 0xffffffffu : offset);
    cd.str(e.name).bytes(cextra.out().data(), cextra.size());
  }
  const uint64_t cd_offset = w.size();
  w.bytes(cd.out().data(), cd.size());
  if (zip64_end) {
    const uint64_t rec = w.size();
    w.put<uint32_t>(0x06064b50).put<uint64_t>(44).put<uint16_t>(45).put<uint16_t>(45);
    w.put<uint32_t>(0).put<uint32_t>(0).put<uint64_t>(entries.size()).put<uint64_t>(entries.size());
    w.put<uint64_t>(cd.size()).put<uint64_t>(cd_offset);
    w.put<uint32_t>(0x07064b50).put<uint32_t>(0).put<uint64_t>(rec).put<uint32_t>(1);
  }
  w.put<uint32_t>(0x06054b50).put<uint16_t>(0).put<uint16_t>(0);
  w.put<uint16_t>(zip64_end ? 0xffff : uint16_t(entries.size()));
  w.put<uint16_t>(zip64_end ? 0xffff : uint16_t(entries.size()));
  w.put<uint32_t>(zip64_end ? 0xffffffffu : uint32_t(cd.size()));
  w.put<uint32_t>(zip64_end ? 0xffffffffu : uint32_t(cd_offset));
  w.put<uint16_t>(uint16_t(comment.size())).str(comment);
  return w.out();
}

// Every prefix of `file` (all lengths up to 4 KiB, then a sample) must fail with a
// parley::Error, never crash or succeed, except the lengths in `valid_lengths` (formats
// that end at any record boundary), which must parse. `parse` parses a byte span.
inline void expect_truncations_fail(const Bytes& file,
                                    const std::function<void(const Bytes&)>& parse,
                                    const std::vector<size_t>& valid_lengths = {}) {
  const size_t step = file.size() <= 4096 ? 1 : file.size() / 1024;
  for (size_t n = 0; n < file.size(); n += step) {
    const Bytes prefix(file.begin(), file.begin() + std::ptrdiff_t(n));
    const bool valid =
        std::find(valid_lengths.begin(), valid_lengths.end(), n) != valid_lengths.end();
    try {
      parse(prefix);
      EXPECT_TRUE(valid) << "prefix of " << n << " of " << file.size()
                         << " bytes parsed without error";
    } catch (const Error&) {
      EXPECT_FALSE(valid) << "prefix of " << n << " bytes should parse";
    }
  }
}

}  // namespace parley::io::testing

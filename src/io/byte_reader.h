// ByteReader: a bounds-checked little-endian cursor over a byte span. Every parser reads
// untrusted files through it, so a length past the end is an error naming the file and
// offset, never an out-of-bounds read.
#pragma once

#include <cstdint>
#include <cstring>
#include <span>
#include <string>
#include <string_view>
#include <type_traits>

#include "engine/error.h"

namespace parley::io {

class ByteReader {
 public:
  // `source` names the format and file in error messages: "[gguf] model.gguf".
  ByteReader(std::span<const uint8_t> bytes, std::string source)
      : bytes_(bytes), source_(std::move(source)) {}

  size_t offset() const { return pos_; }
  size_t size() const { return bytes_.size(); }
  size_t remaining() const { return bytes_.size() - pos_; }
  bool at_end() const { return pos_ == bytes_.size(); }
  const std::string& source() const { return source_; }

  void seek(size_t offset) {
    require_at(offset, 0, "seek");
    pos_ = offset;
  }
  void skip(uint64_t n) {
    require(n, "skip");
    pos_ += size_t(n);
  }

  template <typename T>
  T read() {
    static_assert(std::is_trivially_copyable_v<T>);
    require(sizeof(T), "read");
    T v;
    std::memcpy(&v, bytes_.data() + pos_, sizeof(T));
    pos_ += sizeof(T);
    return v;
  }

  // The next n bytes as a span (no copy).
  std::span<const uint8_t> bytes(uint64_t n) {
    require(n, "read");
    auto s = bytes_.subspan(pos_, size_t(n));
    pos_ += size_t(n);
    return s;
  }
  std::string string(uint64_t n) {
    auto s = bytes(n);
    return std::string(reinterpret_cast<const char*>(s.data()), s.size());
  }

  [[noreturn]] void fail(const std::string& what) const {
    throw Error(ErrorKind::invalid_argument,
                source_ + ": " + what + " (at byte " + std::to_string(pos_) + ")");
  }

 private:
  void require(uint64_t n, const char* what) const { require_at(pos_, n, what); }
  void require_at(uint64_t at, uint64_t n, const char* what) const {
    if (at > bytes_.size() || n > bytes_.size() - at)
      throw Error(ErrorKind::invalid_argument, source_ + ": truncated: " + what + " of " +
                                                   std::to_string(n) + " bytes at offset " +
                                                   std::to_string(at) + " runs past the end (" +
                                                   std::to_string(bytes_.size()) + " bytes)");
  }

  std::span<const uint8_t> bytes_;
  std::string source_;
  size_t pos_ = 0;
};

}  // namespace parley::io

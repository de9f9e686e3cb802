// MappedFile: a read-only memory map of a whole file. Tensors read from model files are
// zero-copy views into it; they hold the map alive through a shared_ptr.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>
#include <string>

namespace parley::io {

class MappedFile {
 public:
  // Maps `path` read-only. Throws Error(not_found) if it cannot be opened; an empty
  // file maps to an empty span.
  static std::shared_ptr<const MappedFile> open(const std::string& path);
  ~MappedFile();
  MappedFile(const MappedFile&) = delete;
  MappedFile& operator=(const MappedFile&) = delete;

  const uint8_t* data() const { return data_; }
  size_t size() const { return size_; }
  std::span<const uint8_t> bytes() const { return {data_, size_}; }
  const std::string& path() const { return path_; }

 private:
  MappedFile() = default;
  const uint8_t* data_ = nullptr;
  size_t size_ = 0;
  std::string path_;
};

// Drops the resident pages wholly inside `bytes`, a range of a MappedFile that nothing will
// read again soon (a loader that has copied the bytes elsewhere). The map stays valid: a page
// touched later is read back from the file.
void release_pages(std::span<const uint8_t> bytes);

}  // namespace parley::io

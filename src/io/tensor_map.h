// TensorMap: the named tensors read from (or written to) a model file, in name order.
// Shared by every reader in src/io so a duplicate name is rejected the same way everywhere.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "engine/error.h"
#include "engine/tensor.h"

namespace parley::io {

// A 64-bit integer array (there is no i64 DType): small index tensors such as
// mlx-whisper's alignment_heads, kept as values.
struct Int64Array {
  Shape shape;
  std::vector<int64_t> values;  // row-major, shape.numel() values
};

class TensorMap {
 public:
  using Map = std::map<std::string, Tensor>;

  // Adds `t` as `name`. `source` names format and file for the message:
  // "[gguf] model.gguf: duplicate tensor name 'x'".
  void insert(const std::string& source, const std::string& name, Tensor t) {
    const bool added = tensors_.emplace(name, std::move(t)).second;
    check_arg(added, source + ": duplicate tensor name '" + name + "'");
  }
  // Throws Error(not_found) naming `source` when there is no tensor `name`.
  const Tensor& at(const std::string& source, const std::string& name) const {
    auto it = tensors_.find(name);
    check(it != tensors_.end(), ErrorKind::not_found, source + ": no tensor named '" + name + "'");
    return it->second;
  }
  const Tensor* find(const std::string& name) const {
    auto it = tensors_.find(name);
    return it == tensors_.end() ? nullptr : &it->second;
  }
  bool contains(const std::string& name) const { return tensors_.count(name) != 0; }
  size_t size() const { return tensors_.size(); }
  bool empty() const { return tensors_.empty(); }
  Map::const_iterator begin() const { return tensors_.begin(); }
  Map::const_iterator end() const { return tensors_.end(); }

 private:
  Map tensors_;
};

}  // namespace parley::io

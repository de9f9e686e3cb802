// Safetensors discovery (single file or index + shards) and checked tensor lookup.
#include "llm/weights.h"

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <set>
#include <sstream>

#include "engine/error.h"
#include "io/safetensors.h"

namespace parley {

namespace fs = std::filesystem;

TensorSource::TensorSource(std::map<std::string, Tensor> tensors, std::string dir)
    : tensors_(std::move(tensors)), dir_(std::move(dir)) {}

bool TensorSource::has(const std::string& name) const {
  return tensors_.count(name) != 0 || quant_.count(name) != 0;
}

const QuantMatrix* TensorSource::quant(const std::string& name, const Shape& shape) const {
  auto it = quant_.find(name);
  if (it == quant_.end()) return nullptr;
  const QuantMatrix& m = it->second;
  int64_t rows = 1;
  for (int i = 0; i + 1 < shape.ndim(); ++i) rows *= shape[i];
  check_arg(shape.ndim() >= 2 && m.rows == rows && m.cols == shape[-1],
            "[llm weights] " + dir_ + ": tensor '" + display(name) + "' is " + m.describe() +
                ", the config implies " + shape.str());
  return &m;
}

std::string TensorSource::display(const std::string& name) const {
  return name_of_ ? name_of_(name) : name;
}

Tensor TensorSource::get(const std::string& name, const Shape& shape) const {
  return get_as(name, shape, device_, dtype_);
}

Tensor TensorSource::get_as(const std::string& name, const Shape& shape, Device device,
                            DType dtype) const {
  auto it = tensors_.find(name);
  check(it != tensors_.end(), ErrorKind::not_found,
        "[llm weights] " + dir_ + ": tensor '" + display(name) + "' is missing");
  const Tensor& t = it->second;
  check_arg(t.shape() == shape, "[llm weights] " + dir_ + ": tensor '" + display(name) +
                                    "' has shape " + t.shape().str() + ", the config implies " +
                                    shape.str());
  check_arg(is_float(t.dtype()), "[llm weights] " + dir_ + ": tensor '" + display(name) + "' is " +
                                     std::string(dtype_name(t.dtype())) + ", not a float type");
  const Tensor typed = t.dtype() == dtype ? t : t.cast(dtype);
  return device == Device::cpu ? typed : typed.to(device);
}

Tensor TensorSource::get_plus_one(const std::string& name, const Shape& shape) const {
  Tensor out = get_as(name, shape, Device::cpu, DType::f32);
  if (!plus_one_stored_) {
    const Tensor src = out;
    out = Tensor::empty(shape, DType::f32);
    for (int64_t i = 0; i < out.numel(); ++i) out.data<float>()[i] = src.data<float>()[i] + 1.0f;
  }
  return device_ == Device::cpu ? out : out.to(device_);
}

TensorSource open_tensor_source(const std::string& dir) {
  const fs::path root(dir);
  std::vector<std::string> files;
  const fs::path index = root / "model.safetensors.index.json";
  if (fs::exists(index)) {
    std::ifstream in(index);
    std::stringstream ss;
    ss << in.rdbuf();
    nlohmann::json j;
    try {
      j = nlohmann::json::parse(ss.str());
    } catch (const nlohmann::json::exception& e) {
      throw Error(ErrorKind::invalid_argument, "[llm weights] " + index.string() + ": " + e.what());
    }
    check_arg(j.contains("weight_map") && j["weight_map"].is_object(),
              "[llm weights] " + index.string() + ": no weight_map object");
    std::set<std::string> shards;
    for (const auto& [name, file] : j["weight_map"].items()) {
      check_arg(file.is_string(), "[llm weights] " + index.string() + ": weight_map['" + name +
                                      "'] is not a file name");
      shards.insert(file.get<std::string>());
    }
    for (const auto& s : shards) files.push_back((root / s).string());
  } else {
    const fs::path single = root / "model.safetensors";
    check(fs::exists(single), ErrorKind::not_found,
          "[llm weights] " + dir + ": no model.safetensors or model.safetensors.index.json");
    files.push_back(single.string());
  }
  std::map<std::string, Tensor> all;
  for (const auto& f : files) {
    check(fs::exists(f), ErrorKind::not_found, "[llm weights] shard " + f + " is missing");
    io::SafetensorsFile st = io::read_safetensors(f);
    for (const auto& [name, t] : st.tensors) {
      const bool added = all.emplace(name, t).second;
      check_arg(added, "[llm weights] " + dir + ": tensor '" + name + "' is in two shards");
    }
  }
  return TensorSource(std::move(all), dir);
}

}  // namespace parley

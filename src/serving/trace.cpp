#include "serving/trace.h"

#include "engine/error.h"

namespace parley {

ChromeTrace::ChromeTrace(const std::string& path) : out_(path), origin_(Clock::now()) {
  check(bool(out_), ErrorKind::not_found, "[trace] cannot create " + path);
  out_ << "[\n";
}

ChromeTrace::~ChromeTrace() {
  out_ << "\n]\n";
  out_.flush();
}

void ChromeTrace::span(std::string_view name, Clock::time_point start, Clock::time_point end,
                       int tid, const nlohmann::json& args) {
  const auto us = [&](Clock::time_point t) {
    return std::chrono::duration<double, std::micro>(t - origin_).count();
  };
  nlohmann::json e = {{"name", name}, {"ph", "X"},  {"ts", us(start)}, {"dur", us(end) - us(start)},
                      {"pid", 1},     {"tid", tid}, {"args", args}};
  out_ << (first_ ? "" : ",\n") << e.dump();
  first_ = false;
}

}  // namespace parley

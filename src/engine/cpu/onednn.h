// The oneDNN handles and helpers the CPU GEMMs share (internal; PARLEY_GEMM_ONEDNN builds
// only): matmul.cpp's f32 / bf16 products and int8_matmul.cpp's integer ones.
#pragma once

#if defined(PARLEY_GEMM_ONEDNN)
#include <cstddef>
#include <map>
#include <mutex>
#include <string_view>
#include <unordered_map>

#include <oneapi/dnnl/dnnl.hpp>

namespace parley::cpu {

// The one CPU engine.
dnnl::engine& onednn_engine();
// The calling thread's stream on it (streams are not documented as safe to share).
dnnl::stream& onednn_stream();
// The calling thread's scratchpad for a primitive execution: at least `bytes`, 64-byte
// aligned, grown and never shrunk (a thread runs one primitive at a time). Primitives are
// created with scratchpad_mode::user and run on this, so a cached primitive may run on
// several threads at once (oneDNN's own scratchpad, with Debian's default
// DNNL_ENABLE_CONCURRENT_EXEC=OFF, is shared by every primitive of the creating thread).
void* onednn_scratchpad(size_t bytes);

// Runs prim (made from pd with scratchpad_mode::user) on `args` with the calling thread's
// stream and scratchpad, and waits; a oneDNN error becomes Error(internal) "<op> oneDNN: ...".
void onednn_execute(const dnnl::primitive& prim, const dnnl::primitive_desc_base& pd,
                    std::unordered_map<int, dnnl::memory> args, std::string_view op);

// The Value cached under key, made by make() the first time (one cache per call site: Make
// is the site's lambda). Past `limit` entries the cache restarts rather than growing
// without bound. A copy goes back: oneDNN's objects are shared handles, so a restart on one
// thread never frees a primitive another thread is running.
template <typename Key, typename Value, typename Make>
Value onednn_cached(const Key& key, size_t limit, Make&& make) {
  static std::mutex mu;
  static std::map<Key, Value> cache;
  std::lock_guard lock(mu);
  auto it = cache.find(key);
  if (it != cache.end()) return it->second;
  if (cache.size() >= limit) cache.clear();
  return cache.emplace(key, make()).first->second;
}

}  // namespace parley::cpu
#endif

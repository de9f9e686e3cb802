// Kernel trace for the device machine: an LD_PRELOAD library that records every kernel's
// start and end on the GPU (CUPTI's activity API, kernels inside CUDA graphs included) and
// writes them as CSV, so a warm, graphed decoder step can be taken apart kernel by kernel.
// ncu cannot do that: it replays each kernel alone, serialized and with its caches flushed,
// which hides what programmatic launches overlap and what L2 keeps between steps.
//
//   g++ -O2 -shared -fPIC -o /tmp/kernel_trace.so tools/device/kernel_trace.cpp
//       -I/usr/local/cuda/include -L/usr/local/cuda/lib64 -lcupti
//   KERNEL_TRACE_OUT=trace.csv LD_PRELOAD=/tmp/kernel_trace.so parley bench whisper ...
//   python3 tools/device/kernel_trace.py trace.csv
//
// Columns: start_ns,end_ns,graph_id,graph_node_id,grid,block,name (name demangled, without
// its parameter list). Records reach the file as CUPTI hands over its buffers and at exit.
#include <cupti.h>
#include <cxxabi.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <string>

namespace {

constexpr size_t kBufferBytes = size_t(8) << 20;

std::FILE* g_out = nullptr;
std::mutex g_mutex;

void check(CUptiResult r, const char* what) {
  if (r == CUPTI_SUCCESS) return;
  const char* msg = nullptr;
  cuptiGetResultString(r, &msg);
  std::fprintf(stderr, "[kernel_trace] %s: %s\n", what, msg ? msg : "?");
}

// The demangled name up to its parameter list (template arguments kept), without
// "(anonymous namespace)::", commas replaced so the CSV stays one field.
std::string short_name(const char* mangled) {
  int status = 0;
  char* d = abi::__cxa_demangle(mangled, nullptr, nullptr, &status);
  std::string s = status == 0 && d ? d : mangled;
  std::free(d);
  const std::string anon = "(anonymous namespace)::";
  for (size_t at = s.find(anon); at != std::string::npos; at = s.find(anon, at)) s.erase(at, anon.size());
  int depth = 0;
  for (size_t i = 0; i < s.size(); ++i) {
    if (s[i] == '<') ++depth;
    if (s[i] == '>') --depth;
    if (s[i] == '(' && depth == 0) {
      s.resize(i);
      break;
    }
  }
  for (char& c : s)
    if (c == ',') c = ';';
  return s;
}

void CUPTIAPI buffer_requested(uint8_t** buffer, size_t* size, size_t* max_records) {
  *buffer = static_cast<uint8_t*>(std::aligned_alloc(8, kBufferBytes));
  *size = kBufferBytes;
  *max_records = 0;  // as many as fit
}

void CUPTIAPI buffer_completed(CUcontext, uint32_t, uint8_t* buffer, size_t, size_t valid) {
  std::lock_guard<std::mutex> lock(g_mutex);
  CUpti_Activity* record = nullptr;
  while (cuptiActivityGetNextRecord(buffer, valid, &record) == CUPTI_SUCCESS) {
    if (record->kind != CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL &&
        record->kind != CUPTI_ACTIVITY_KIND_KERNEL)
      continue;
    const auto* k = reinterpret_cast<const CUpti_ActivityKernel10*>(record);
    if (g_out)
      std::fprintf(g_out, "%llu,%llu,%u,%llu,%dx%dx%d,%dx%dx%d,%s\n",
                   static_cast<unsigned long long>(k->start),
                   static_cast<unsigned long long>(k->end), k->graphId,
                   static_cast<unsigned long long>(k->graphNodeId), k->gridX, k->gridY, k->gridZ,
                   k->blockX, k->blockY, k->blockZ, short_name(k->name).c_str());
  }
  size_t dropped = 0;
  cuptiActivityGetNumDroppedRecords(nullptr, 0, &dropped);
  if (dropped) std::fprintf(stderr, "[kernel_trace] %zu records dropped\n", dropped);
  std::free(buffer);
}

void finish() {
  check(cuptiActivityFlushAll(CUPTI_ACTIVITY_FLAG_FLUSH_FORCED), "cuptiActivityFlushAll");
  std::lock_guard<std::mutex> lock(g_mutex);
  if (g_out) std::fclose(g_out);
  g_out = nullptr;
}

__attribute__((constructor)) void start() {
  const char* path = std::getenv("KERNEL_TRACE_OUT");
  g_out = std::fopen(path ? path : "kernel_trace.csv", "w");
  if (!g_out) {
    std::fprintf(stderr, "[kernel_trace] cannot write %s\n", path ? path : "kernel_trace.csv");
    return;
  }
  std::fprintf(g_out, "start_ns,end_ns,graph_id,graph_node_id,grid,block,name\n");
  check(cuptiActivityRegisterCallbacks(buffer_requested, buffer_completed),
        "cuptiActivityRegisterCallbacks");
  check(cuptiActivityEnable(CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL), "cuptiActivityEnable");
  std::atexit(finish);
}

}  // namespace

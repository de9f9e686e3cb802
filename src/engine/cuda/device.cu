// The CUDA device: availability, memory and copies (device.h), and the backend's shared
// state (common.cuh): error translation, the stream, the cuBLAS handle, scratch memory.
#include <atomic>
#include <cstdio>
#include <string>

#include "engine/cuda/common.cuh"
#include "engine/device.h"
#include "engine/env.h"

namespace parley {

bool cuda_available() {
  static const bool available = [] {
    int count = 0;
    const cudaError_t err = cudaGetDeviceCount(&count);
    if (err != cudaSuccess) {
      cudaGetLastError();  // no driver / no device is not an error to keep around
      return false;
    }
    return count > 0;
  }();
  return available;
}

namespace cuda {

namespace {

bool is_oom(cudaError_t err) { return err == cudaErrorMemoryAllocation; }

struct DeviceInfo {
  int device = 0;
  int sm_count = 0;
  size_t smem_optin = 0;
  std::string label;
};

const DeviceInfo& info() {
  static const DeviceInfo d = [] {
    DeviceInfo r;
    check_cuda(cudaGetDevice(&r.device), "cudaGetDevice");
    cudaDeviceProp p{};
    check_cuda(cudaGetDeviceProperties(&p, r.device), "cudaGetDeviceProperties");
    r.sm_count = p.multiProcessorCount;
    r.smem_optin = p.sharedMemPerBlockOptin;
    const double gib = double(p.totalGlobalMem) / double(1ull << 30);
    r.label = std::string(p.name) + " (sm_" + std::to_string(p.major) + std::to_string(p.minor) +
              ", " + std::to_string(int(gib + 0.5)) + " GiB)";
    return r;
  }();
  return d;
}

}  // namespace

void check_cuda(cudaError_t err, const char* what) {
  if (err == cudaSuccess) return;
  cudaGetLastError();  // clear a non-sticky error so the next call starts clean
  throw Error(is_oom(err) ? ErrorKind::resource_exhausted : ErrorKind::internal,
              std::string("[cuda] ") + what + ": " + cudaGetErrorString(err));
}

void check_cublas(cublasStatus_t status, const char* what) {
  if (status == CUBLAS_STATUS_SUCCESS) return;
  throw Error(
      status == CUBLAS_STATUS_ALLOC_FAILED ? ErrorKind::resource_exhausted : ErrorKind::internal,
      std::string("[cublas] ") + what + ": " + cublasGetStatusString(status));
}

cudaStream_t stream() {
  static const cudaStream_t s = [] {
    cudaStream_t r = nullptr;
    check_cuda(cudaStreamCreateWithFlags(&r, cudaStreamNonBlocking), "cudaStreamCreateWithFlags");
    return r;
  }();
  return s;
}

cublasHandle_t cublas() {
  static const cublasHandle_t h = [] {
    constexpr size_t kWorkspaceBytes = size_t(32) << 20;  // NVIDIA's advice for Hopper
    cublasHandle_t r = nullptr;
    check_cublas(cublasCreate(&r), "cublasCreate");
    check_cublas(cublasSetStream(r, stream()), "cublasSetStream");
    void* workspace = nullptr;
    check_cuda(cudaMalloc(&workspace, kWorkspaceBytes), "cudaMalloc (cuBLAS workspace)");
    check_cublas(cublasSetWorkspace(r, workspace, kWorkspaceBytes), "cublasSetWorkspace");
    // The default math mode never uses TF32 for CUBLAS_COMPUTE_32F; say so explicitly.
    check_cublas(cublasSetMathMode(r, CUBLAS_DEFAULT_MATH), "cublasSetMathMode");
    return r;
  }();
  return h;
}

int sm_count() { return info().sm_count; }
size_t shared_memory_optin() { return info().smem_optin; }

cudaDataType_t cuda_data_type(DType t) {
  switch (t) {
    case DType::f32: return CUDA_R_32F;
    case DType::f16: return CUDA_R_16F;
    case DType::bf16: return CUDA_R_16BF;
    case DType::i32: return CUDA_R_32I;
    case DType::i8: return CUDA_R_8I;
  }
  throw Error(ErrorKind::internal, "[cuda] unknown dtype");
}

void check_rows(int64_t rows, const char* op) {
  if (!(rows <= int64_t(0x7fffffff)))
    throw Error(ErrorKind::unsupported, std::string("[") + op + "] " + std::to_string(rows) +
                                            " rows exceed the CUDA grid limit");
}

namespace {
std::mutex g_scratch_mutex;
void* g_scratch = nullptr;
size_t g_scratch_bytes = 0;
std::atomic<uint64_t> g_scratch_generation{0};
}  // namespace

Scratch::Scratch(size_t bytes) : lock_(g_scratch_mutex) {
  if (bytes > g_scratch_bytes) {
    if (capturing())
      throw Error(ErrorKind::internal, "[cuda] scratch of " + std::to_string(bytes) +
                                           " bytes needed while capturing a graph; reserve it");
    g_scratch_generation.fetch_add(1);
    constexpr size_t kGranule = size_t(1) << 20;
    const size_t want = (bytes + kGranule - 1) / kGranule * kGranule;
    if (g_scratch) {
      // Kernels enqueued by earlier holders may still read the old buffer.
      check_cuda(cudaStreamSynchronize(stream()), "cudaStreamSynchronize (scratch)");
      check_cuda(cudaFree(g_scratch), "cudaFree (scratch)");
      g_scratch = nullptr;
      g_scratch_bytes = 0;
    }
    const cudaError_t err = cudaMalloc(&g_scratch, want);
    if (err != cudaSuccess) {
      g_scratch = nullptr;
      check_cuda(err, ("cudaMalloc of " + std::to_string(want) + " bytes of scratch").c_str());
    }
    g_scratch_bytes = want;
  }
  ptr_ = g_scratch;
}

void reserve_scratch(size_t bytes) { Scratch reserve(bytes); }

uint64_t scratch_generation() { return g_scratch_generation.load(); }

void bump_scratch_generation() { g_scratch_generation.fetch_add(1); }

bool capturing() {
  cudaStreamCaptureStatus status = cudaStreamCaptureStatusNone;
  check_cuda(cudaStreamIsCapturing(stream(), &status), "cudaStreamIsCapturing");
  return status != cudaStreamCaptureStatusNone;
}

// Whether the capture in progress takes programmatic dependents (begin_capture).
std::atomic<bool> g_capture_programmatic{false};

bool programmatic_capture() {
  static const bool on = env_switch_on("PARLEY_PDL");
  return on && g_capture_programmatic.load(std::memory_order_relaxed) && capturing();
}

// --- graphs ------------------------------------------------------------------------------

class Graph {
 public:
  explicit Graph(cudaGraphExec_t exec) : exec_(exec) {}
  ~Graph() { cudaGraphExecDestroy(exec_); }
  Graph(const Graph&) = delete;
  Graph& operator=(const Graph&) = delete;
  cudaGraphExec_t exec() const { return exec_; }

 private:
  cudaGraphExec_t exec_;
};

void begin_capture(bool programmatic) {
  check_cuda(cudaStreamBeginCapture(stream(), cudaStreamCaptureModeRelaxed),
             "cudaStreamBeginCapture");
  g_capture_programmatic = programmatic;
}

std::shared_ptr<Graph> end_capture() {
  cudaGraph_t graph = nullptr;
  g_capture_programmatic = false;
  check_cuda(cudaStreamEndCapture(stream(), &graph), "cudaStreamEndCapture");
  cudaGraphExec_t exec = nullptr;
  const cudaError_t err = cudaGraphInstantiate(&exec, graph, 0);
  cudaGraphDestroy(graph);
  check_cuda(err, "cudaGraphInstantiate");
  return std::make_shared<Graph>(exec);
}

void abort_capture() noexcept {
  cudaGraph_t graph = nullptr;
  g_capture_programmatic = false;
  if (cudaStreamEndCapture(stream(), &graph) == cudaSuccess && graph) cudaGraphDestroy(graph);
  cudaGetLastError();
}

void launch(const Graph& graph) {
  check_cuda(cudaGraphLaunch(graph.exec(), stream()), "cudaGraphLaunch");
}

// --- device.h --------------------------------------------------------------------------

void* malloc_device(size_t bytes) {
  void* p = nullptr;
  const cudaError_t err = cudaMalloc(&p, bytes);
  if (err == cudaSuccess) return p;
  cudaGetLastError();
  const ErrorKind kind = is_oom(err) ? ErrorKind::resource_exhausted
                         : (err == cudaErrorNoDevice || err == cudaErrorInsufficientDriver)
                             ? ErrorKind::unsupported
                             : ErrorKind::internal;
  throw Error(kind, "[cuda] cudaMalloc of " + std::to_string(bytes) +
                        " bytes failed: " + cudaGetErrorString(err));
}

// Never throws: it runs inside Tensor deleters (noexcept), where an exception would end the
// process; and after a kernel fault every later call fails anyway, which the next checked
// call reports. Reports the first few failures on stderr.
void free_device(void* ptr) {
  const cudaError_t err = cudaFree(ptr);
  if (err == cudaSuccess || err == cudaErrorCudartUnloading) return;
  static std::atomic<int> reported{0};
  if (reported.fetch_add(1) < 4)
    std::fprintf(stderr, "[cuda] cudaFree failed: %s\n", cudaGetErrorString(err));
}

// Copies run on stream(), so they are ordered after every kernel enqueued before them.
// Host <-> device copies wait for completion: the host buffer is the caller's to reuse or
// read as soon as the call returns.
void memcpy_h2d(void* dst, const void* src, size_t bytes) {
  check_cuda(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyHostToDevice, stream()),
             "cudaMemcpyAsync (host to device)");
  check_cuda(cudaStreamSynchronize(stream()), "cudaStreamSynchronize (after host to device)");
}

void memcpy_d2h(void* dst, const void* src, size_t bytes) {
  check_cuda(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDeviceToHost, stream()),
             "cudaMemcpyAsync (device to host)");
  check_cuda(cudaStreamSynchronize(stream()), "cudaStreamSynchronize (after device to host)");
}

void memcpy_d2d(void* dst, const void* src, size_t bytes) {
  check_cuda(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDeviceToDevice, stream()),
             "cudaMemcpyAsync (device to device)");
}

void synchronize() { check_cuda(cudaStreamSynchronize(stream()), "cudaStreamSynchronize"); }

void* malloc_pinned(size_t bytes) {
  void* p = nullptr;
  check_cuda(cudaMallocHost(&p, bytes),
             ("cudaMallocHost of " + std::to_string(bytes) + " bytes").c_str());
  return p;
}

// Never throws (it runs in deleters); see free_device.
void free_pinned(void* ptr) noexcept {
  cudaStreamSynchronize(stream());
  const cudaError_t err = cudaFreeHost(ptr);
  if (err == cudaSuccess || err == cudaErrorCudartUnloading) return;
  static std::atomic<int> reported{0};
  if (reported.fetch_add(1) < 4)
    std::fprintf(stderr, "[cuda] cudaFreeHost failed: %s\n", cudaGetErrorString(err));
}

void memcpy_d2h_async(void* dst, const void* src, size_t bytes) {
  check_cuda(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDeviceToHost, stream()),
             "cudaMemcpyAsync (device to pinned host)");
}

Event::Event() {
  cudaEvent_t e = nullptr;
  check_cuda(cudaEventCreateWithFlags(&e, cudaEventDisableTiming), "cudaEventCreateWithFlags");
  handle_ = e;
}

Event::~Event() { cudaEventDestroy(static_cast<cudaEvent_t>(handle_)); }

void Event::record() {
  check_cuda(cudaEventRecord(static_cast<cudaEvent_t>(handle_), stream()), "cudaEventRecord");
}

void Event::wait() const {
  check_cuda(cudaEventSynchronize(static_cast<cudaEvent_t>(handle_)), "cudaEventSynchronize");
}

std::mutex& exclusive() {
  static std::mutex* m = new std::mutex;  // never destroyed, as the stream
  return *m;
}

std::string_view device_label() {
  if (!cuda_available()) return "none";
  return info().label;
}

}  // namespace cuda
}  // namespace parley

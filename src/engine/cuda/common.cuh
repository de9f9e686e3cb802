// Internal to the CUDA backend (src/engine/cuda/): error checks, the process-wide stream,
// cuBLAS handle and scratch buffer, launch sizing, block reductions, and the device-side
// view of parley's 16-bit storage types.
//
// Execution model (for now): one device (the current one, normally 0) and one global
// non-blocking stream that every kernel, cuBLAS call and copy goes to, so all work is
// ordered on it and host threads need no further synchronization between ops. It is a
// real stream rather than the legacy default stream so that CUDA graph capture of a
// decoder step can be added later without touching the ops.
#pragma once

#include <cublas_v2.h>
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>
#include <library_types.h>

#include <cstdint>
#include <mutex>
#include <string>
#include <string_view>
#include <utility>

#include "engine/dtype.h"
#include "engine/error.h"
#include "engine/tensor.h"

namespace parley::cuda {

// --- Errors ----------------------------------------------------------------------------

// Throws parley::Error "[cuda] <what>: <cudaGetErrorString>" unless err is cudaSuccess.
// Out-of-memory errors are resource_exhausted; everything else is internal.
void check_cuda(cudaError_t err, const char* what);
// The same for cuBLAS status codes.
void check_cublas(cublasStatus_t status, const char* what);
// Call right after a kernel launch: turns a bad launch configuration into an Error that
// names the op. (Faults inside the kernel surface at the next synchronizing call.)
inline void check_launch(const char* op) { check_cuda(cudaGetLastError(), op); }

// --- Process-wide state (created lazily, thread-safe, never destroyed: destroying CUDA
// objects from static destructors races the runtime's own teardown) --------------------

cudaStream_t stream();
// A cuBLAS handle bound to stream(), with its own 32 MiB workspace (so that a later CUDA
// graph capture does not make cuBLAS allocate).
cublasHandle_t cublas();
int sm_count();
size_t shared_memory_optin();  // the most dynamic shared memory one block may opt in to

// A grow-only device buffer for op temporaries (im2col columns). Holding a Scratch locks
// the buffer; since all work runs on stream(), the next holder's kernels are ordered after
// ours, so the lock only has to cover enqueueing. Do not hold two at once (self-deadlock).
// Growing synchronizes the stream and reallocates: size it at model load to keep
// cudaMalloc out of hot loops, and never grow it during graph capture.
class Scratch {
 public:
  explicit Scratch(size_t bytes);
  void* data() const { return ptr_; }

 private:
  std::unique_lock<std::mutex> lock_;
  void* ptr_ = nullptr;
};

// --- Types -----------------------------------------------------------------------------

// parley's storage types have the CUDA types' bit layout; kernels use the CUDA types.
template <typename T>
struct DeviceType {
  using type = T;
};
template <>
struct DeviceType<f16_t> {
  using type = __half;
};
template <>
struct DeviceType<bf16_t> {
  using type = __nv_bfloat16;
};
static_assert(sizeof(__half) == sizeof(f16_t) && sizeof(__nv_bfloat16) == sizeof(bf16_t));

// dispatch_float with the CUDA element type: fn(float{}), fn(__half{}) or fn(__nv_bfloat16{}).
template <typename Fn>
decltype(auto) dispatch_device_float(DType t, std::string_view op, Fn&& fn) {
  return dispatch_float(t, op, [&](auto tag) {
    using T = typename DeviceType<decltype(tag)>::type;
    return fn(T{});
  });
}

cudaDataType_t cuda_data_type(DType t);

__device__ __forceinline__ float dev_to_f32(float x) { return x; }
__device__ __forceinline__ float dev_to_f32(__half x) { return __half2float(x); }
__device__ __forceinline__ float dev_to_f32(__nv_bfloat16 x) { return __bfloat162float(x); }

template <typename T>
__device__ __forceinline__ T dev_from_f32(float x);
template <>
__device__ __forceinline__ float dev_from_f32<float>(float x) {
  return x;
}
template <>
__device__ __forceinline__ __half dev_from_f32<__half>(float x) {
  return __float2half_rn(x);
}
template <>
__device__ __forceinline__ __nv_bfloat16 dev_from_f32<__nv_bfloat16>(float x) {
  return __float2bfloat16_rn(x);
}

// A per-channel parameter (bias, gamma, beta) whose dtype (f32 or the input's) is known
// only at run time; the branch is uniform across a launch. ptr == nullptr means absent.
struct ParamRef {
  const void* ptr = nullptr;
  DType dtype = DType::f32;
};
inline ParamRef param_ref(const Tensor* t) {
  return t ? ParamRef{t->raw(), t->dtype()} : ParamRef{};
}
__device__ __forceinline__ float load_param(ParamRef p, int64_t i) {
  switch (p.dtype) {
    case DType::f16: return __half2float(static_cast<const __half*>(p.ptr)[i]);
    case DType::bf16: return __bfloat162float(static_cast<const __nv_bfloat16*>(p.ptr)[i]);
    default: return static_cast<const float*>(p.ptr)[i];
  }
}

// --- Launch sizing ---------------------------------------------------------------------

constexpr int kThreads = 256;

// Blocks for a grid-stride loop over n elements: enough to fill the GPU, no more.
inline unsigned grid_for(int64_t n, int threads = kThreads) {
  const int64_t blocks = (n + threads - 1) / threads;
  const int64_t cap = int64_t(sm_count()) * 32;
  return unsigned(blocks < cap ? (blocks > 0 ? blocks : 1) : cap);
}

// Threads for one block per row of length n: about 4 elements a thread, 32..1024.
inline int threads_for_row(int64_t n) {
  int64_t t = ((n + 3) / 4 + 31) / 32 * 32;
  return int(t < 32 ? 32 : (t > 1024 ? 1024 : t));
}

// Checks that a one-block-per-row grid fits in gridDim.x.
void check_rows(int64_t rows, const char* op);

// --- Shared device math ----------------------------------------------------------------

// Exact GELU, 0.5 v (1 + erf(v / sqrt 2)) (PyTorch's default): the gelu op and the skinny
// GEMM's fused epilogue compute it alike.
__device__ __forceinline__ float gelu_erf(float v) {
  constexpr float kInvSqrt2 = 0.70710678118654752f;
  return 0.5f * v * (1.0f + erff(v * kInvSqrt2));
}

// The gate activation of a chat model's MLP (ops/glu.h): silu x / (1 + e^-x), or GELU's tanh
// form (Gemma) when !silu; glu and glu_halves compute it alike.
__device__ __forceinline__ float glu_gate(float x, bool silu) {
  if (silu) return x / (1.0f + expf(-x));
  constexpr float k = 0.7978845608028654f;  // sqrt(2 / pi)
  return 0.5f * x * (1.0f + tanhf(k * (x + 0.044715f * x * x * x)));
}

// --- Programmatic dependent launch (sm_90; no-ops on older devices) ---------------------
// A kernel launched with launch_dependent() (below) may start while the kernel before it
// on the stream is still running, once that kernel's blocks have all called
// allow_dependents() (or exited). Until it calls wait_for_inputs() it may only read memory
// no earlier kernel writes (weights); wait_for_inputs() returns when the kernels before it
// have finished and their writes are visible. Every kernel launched so must call
// wait_for_inputs() before it reads or writes activations, so completion stays ordered.
// allow_dependents() early in a kernel lets the next one load its weights meanwhile.
__device__ __forceinline__ void allow_dependents() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile("griddepcontrol.launch_dependents;" ::: "memory");
#endif
}
__device__ __forceinline__ void wait_for_inputs() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile("griddepcontrol.wait;" ::: "memory");
#endif
}

// Whether stream() is capturing a graph now.
bool capturing();
// Marks that a buffer captured graphs may point into has moved (scratch_generation()).
void bump_scratch_generation();
// Whether launches now may overlap their predecessor's tail: a capture begun with
// programmatic = true (begin_capture, device.h) is in progress, and PARLEY_PDL is not 0.
bool programmatic_capture();

// Launches kernel<<<grid, block, smem, stream()>>>(args...); while programmatic_capture()
// (a greedy decoder step being captured into a graph), as a programmatic dependent of the
// kernel before it (cudaLaunchKernelEx with programmatic stream serialization, which the graph
// keeps as a programmatic edge). Eager launches stay plain: a beam step launched from the
// host measured 0.67 -> 0.73 ms with the attribute (bench/RESULTS.md).
template <typename... Params, typename... Args>
void launch_dependent(void (*kernel)(Params...), dim3 grid, dim3 block, size_t smem,
                      Args&&... args) {
  cudaLaunchConfig_t cfg{};
  cfg.gridDim = grid;
  cfg.blockDim = block;
  cfg.dynamicSmemBytes = smem;
  cfg.stream = stream();
  cudaLaunchAttribute attr[1];
  attr[0].id = cudaLaunchAttributeProgrammaticStreamSerialization;
  attr[0].val.programmaticStreamSerializationAllowed = 1;
  cfg.attrs = attr;
  cfg.numAttrs = programmatic_capture() ? 1 : 0;
  check_cuda(cudaLaunchKernelEx(&cfg, kernel, std::forward<Args>(args)...), "cudaLaunchKernelEx");
}

// --- Last-block counters ---------------------------------------------------------------
// A kernel whose blocks split one unit of work (a (row, head) of split attention, a row of
// masked_topk) can finish it in the last of those blocks instead of a second launch: each
// block writes its partial results and counts itself on the unit's counter; the block that
// counts last reads the others' results and resets the counter (the pattern of CUDA's
// threadFenceReduction sample). Counters are touched only after wait_for_inputs(), so launches
// of one op on stream() never share one in flight.

// Every thread of the block calls it after the block wrote its results; true in every thread
// of the one block of `blocks` that counts last on *counter. That block then sees the others'
// writes (read them with __ldcg or volatile loads: L1 is not coherent across blocks), and the
// counter is back at zero for the next launch or graph replay.
__device__ __forceinline__ bool last_to_finish(int* counter, int blocks) {
  __shared__ bool last;
  __threadfence();  // this block's results are visible before its count
  __syncthreads();
  if (threadIdx.x == 0) {
    last = atomicAdd(counter, 1) == blocks - 1;
    if (last) *counter = 0;  // every other block has counted
  }
  __syncthreads();
  if (last) __threadfence();
  return last;
}

// The device ints behind last_to_finish for one op (a function-local static: never destroyed,
// see above), zero between launches. Grow-only like Scratch: growing synchronizes the stream and
// reallocates, so it must happen before a graph capture (the decoder's eager run first), and
// growing during one is an internal error.
class LastBlockCounters {
 public:
  // op names the errors; min_size counters at least on the first allocation.
  LastBlockCounters(const char* op, int64_t min_size) : op_(op), min_size_(min_size) {}

  // At least n counters, zero for the work queued on stream() from now on.
  int* get(int64_t n) {
    std::lock_guard<std::mutex> lock(mutex_);
    if (n > size_) grow(n);
    return counters_;
  }

 private:
  void grow(int64_t n) {
    const std::string op = std::string("[") + op_ + "] ";
    if (capturing())
      throw Error(ErrorKind::internal, op + "last-block counters grown during graph capture");
    const int64_t want = n > min_size_ ? n : min_size_;
    if (counters_) {  // kernels queued earlier may still count on the old ones
      check_cuda(cudaStreamSynchronize(stream()), (op + "cudaStreamSynchronize").c_str());
      check_cuda(cudaFree(counters_), (op + "cudaFree (counters)").c_str());
      counters_ = nullptr;
      size_ = 0;
    }
    bump_scratch_generation();  // graphs captured with the old counters are stale
    check_cuda(cudaMalloc(&counters_, size_t(want) * sizeof(int)),
               (op + "cudaMalloc (counters)").c_str());
    check_cuda(cudaMemsetAsync(counters_, 0, size_t(want) * sizeof(int), stream()),
               (op + "cudaMemsetAsync (counters)").c_str());
    size_ = want;
  }

  std::mutex mutex_;
  const char* op_;
  int64_t min_size_;
  int* counters_ = nullptr;
  int64_t size_ = 0;
};

// --- Block reductions (every thread of the block calls them; blockDim.x % 32 == 0) ------

struct SumOp {
  __device__ float operator()(float a, float b) const { return a + b; }
};
// Max that propagates NaN (fmaxf would drop it).
struct MaxOp {
  __device__ float operator()(float a, float b) const { return (a > b || a != a) ? a : b; }
};

template <typename Op>
__device__ __forceinline__ float warp_reduce(float v, Op op) {
  for (int offset = 16; offset > 0; offset >>= 1)
    v = op(v, __shfl_xor_sync(0xffffffffu, v, offset));
  return v;
}

// Returns the reduction of v over the block to every thread.
template <typename Op>
__device__ float block_reduce(float v, Op op) {
  __shared__ float partial[32];
  v = warp_reduce(v, op);
  __syncthreads();  // a previous call's readers are done with `partial`
  if ((threadIdx.x & 31) == 0) partial[threadIdx.x >> 5] = v;
  __syncthreads();
  float r = partial[0];
  const int warps = int(blockDim.x >> 5);
  for (int w = 1; w < warps; ++w) r = op(r, partial[w]);
  return r;
}

// --- GEMM (defined in matmul.cu, shared with conv1d) -----------------------------------

// Row-major c[i] (M x N) = alpha * a[i] (M x K) @ op(b[i]) + beta * c[i] for i < batch,
// where op(b) is b (K x N) or, with trans_b, b^T for b stored N x K. Strides are in
// elements (0 shares one matrix across the batch). a and b have ab_type, c has c_type;
// f32 accumulation (CUBLAS_COMPUTE_32F: no TF32 for f32 inputs, the parity path).
struct GemmArgs {
  const void* a;
  const void* b;
  void* c;
  DType ab_type;
  DType c_type;
  int64_t m, n, k;
  bool trans_b = false;
  int64_t batch = 1;
  int64_t stride_a = 0, stride_b = 0, stride_c = 0;
  float alpha = 1.0f;
  float beta = 0.0f;
};
void gemm(const GemmArgs& g, const char* op);

struct GemvChoice;  // choice.cuh

// The LayerNorm folded into gemv (MatmulOptions::norm): gamma [K] of a's dtype, 16-byte
// aligned; w_gamma, w_shift f32 [N]; inv_k = 1 / K.
struct GemvNorm {
  const void* gamma = nullptr;
  const float* w_gamma = nullptr;
  const float* w_shift = nullptr;
  float eps = 0.0f, inv_k = 0.0f;
};

// The skinny-GEMM path (gemv.cu) for g.m <= 8 rows against a 2-D trans_b f16/bf16 weight
// (decoder steps), bias [N] (f32 or c's dtype, absent when ptr is null) added before
// beta * c, then exact GELU when `gelu` (only with beta == 0); with `norm`, a's rows
// LayerNormed first (folded, 1-3 rows only). Returns false, launching nothing, when g is not
// a shape it takes.
// With `choice` (choice.cuh: one row into f32 c only), the same launch also makes masked_topk's
// k = 1 choice of c's row, and a one-block merge follows it.
bool gemv(const GemmArgs& g, ParamRef bias, bool gelu, const char* op,
          const GemvNorm* norm = nullptr, const GemvChoice* choice = nullptr);

// c[r, j] = beta * c[r, j] + bias[r % channels if per_row else j] for a rows x cols matrix
// of c_type (beta == 0 ignores c's old contents, NaN included; bias may be absent).
void scale_add_bias(void* c, DType c_type, int64_t rows, int64_t cols, float beta, ParamRef bias,
                    bool per_row, int64_t channels, const char* op);

}  // namespace parley::cuda

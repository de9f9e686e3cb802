// Where a tensor's memory lives, and the raw memory calls each device provides.
// Without CUDA the cuda_* functions come from no_cuda/ and throw "built without CUDA".
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string_view>

namespace parley {

enum class Device : uint8_t { cpu, cuda };

std::string_view device_name(Device d);

// True when this build has CUDA and a CUDA device is present.
bool cuda_available();

namespace cuda {
void* malloc_device(size_t bytes);
void free_device(void* ptr);
void memcpy_h2d(void* dst, const void* src, size_t bytes);
void memcpy_d2h(void* dst, const void* src, size_t bytes);
void memcpy_d2d(void* dst, const void* src, size_t bytes);
void synchronize();
// Page-locked host memory, the only kind a device-to-host copy can fill without stalling
// the host (free_pinned waits for the queued work first, which may still be copying into it).
void* malloc_pinned(size_t bytes);
void free_pinned(void* ptr) noexcept;
// Queues a device-to-host copy into pinned memory and returns at once; the bytes are there
// once an Event recorded after it has passed. (memcpy_d2h waits for the copy.)
void memcpy_d2h_async(void* dst, const void* src, size_t bytes);
// A mark in the stream's queue: record() marks the work queued so far, wait() blocks the
// calling thread until that work has run (not the work queued after it).
class Event {
 public:
  Event();
  ~Event();
  Event(const Event&) = delete;
  Event& operator=(const Event&) = delete;
  void record();
  void wait() const;

 private:
  [[maybe_unused]] void* handle_ = nullptr;  // cudaEvent_t (unused in builds without CUDA)
};
std::string_view device_label();  // e.g. "NVIDIA H200 (sm_90, 139 GiB)"
// Held by a service for the whole of its GPU work when several share the device (the chat
// engine and Whisper in one server): a stream capture in progress must see only its own
// launches, and no other thread may allocate, free or synchronize meanwhile.
std::mutex& exclusive();

// CUDA graphs: the work this thread queues on the backend's stream between begin_capture()
// and end_capture() is recorded, not run, and launch() replays it with the same pointers
// (a decoder step: one launch instead of a hundred). No host <-> device copy may be
// queued while capturing. programmatic: the kernels launched through cuda::launch_dependent
// are captured as programmatic dependents of the kernel before them (overlapping its tail;
// PARLEY_PDL=0 turns that off everywhere); false captures them plain (beam search's rows
// steps, where it measured 11-12 us a step slower, bench/RESULTS.md).
class Graph;
void begin_capture(bool programmatic = true);
std::shared_ptr<Graph> end_capture();  // instantiated, ready to launch
void abort_capture() noexcept;         // ends a capture that failed half way, discarding it
void launch(const Graph& graph);
// The backend's scratch buffer (op temporaries) at least `bytes` now, so that it does not
// move later: graphs keep its address. scratch_generation() changes whenever it (or another
// buffer that kernels share, such as the last-block counters) moves.
void reserve_scratch(size_t bytes);
uint64_t scratch_generation();
}  // namespace cuda

}  // namespace parley

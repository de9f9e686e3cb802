// Where a tensor's memory lives, and the raw memory calls each device provides.
// Without CUDA the cuda_* functions come from no_cuda/ and throw "built without CUDA".
#pragma once

#include <cstddef>
#include <cstdint>
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
std::string_view device_label();  // e.g. "NVIDIA H200 (sm_90, 139 GiB)"
}  // namespace cuda

}  // namespace parley

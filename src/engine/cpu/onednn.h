// The oneDNN handles the CPU GEMMs share (internal; PARLEY_GEMM_ONEDNN builds only):
// matmul.cpp's f32 / bf16 products and int8_matmul.cpp's integer ones.
#pragma once

#if defined(PARLEY_GEMM_ONEDNN)
#include <cstddef>

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

}  // namespace parley::cpu
#endif

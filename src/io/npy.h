// NumPy .npy arrays (format versions 1.0, 2.0, 3.0; numpy/lib/format.py): read one array as
// a Tensor, and write one (the CLI's `whisper dump` writes intermediates this way so
// Python reference scripts can np.load them).
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "engine/tensor.h"
#include "io/tensor_map.h"

namespace parley::io {

// Parses a whole .npy image. Supported dtypes: '<f4' f32, '<f2' f16, '<i4' i32, '|i1' i8;
// C order (fortran_order True only for 0/1-D arrays, where it is the same). Others throw
// Error(unsupported) naming the descr. The result views `bytes` when aligned (holding
// `owner`, which must keep them alive) and is a copy otherwise. `source` names format and
// file in messages: "[npy] x.npy" or "[npz] f.npz: mel_80.npy".
Tensor parse_npy(std::span<const uint8_t> bytes, std::shared_ptr<const void> owner,
                 const std::string& source);

// The values of a '<i8' array (there is no i64 Tensor); nullopt for any other dtype.
// Malformed images throw as parse_npy.
std::optional<Int64Array> parse_npy_int64(std::span<const uint8_t> bytes,
                                          const std::string& source);

// Maps and parses `path`.
Tensor read_npy(const std::string& path);

// The bytes of a version 1.0 .npy file holding `t` (copied to the host if on CUDA).
// bf16 has no NumPy dtype: it is written as '<f4' (exact widening).
std::vector<uint8_t> serialize_npy(const Tensor& t);
void write_npy(const std::string& path, const Tensor& t);

}  // namespace parley::io

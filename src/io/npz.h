// NumPy .npz archives (np.savez / np.savez_compressed): a zip file of .npy arrays. Reads
// the central directory (ZIP64 included), stored (method 0) and deflated (method 8)
// entries, and returns the arrays by name without the ".npy" suffix ("mel_80").
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <span>
#include <string>

#include "io/tensor_map.h"

namespace parley::io {

struct NpzOptions {
  // Where '<i8' arrays go (by name, as values); null: they throw Error(unsupported) like
  // any other dtype without a Tensor type.
  std::map<std::string, Int64Array>* int64_arrays = nullptr;
  // Check each entry's CRC-32 (on by default; the fuzz target turns it off so random
  // inputs reach the .npy parser).
  bool verify_crc = true;
};

// Maps and reads `path`. Stored entries are views into the map (copies where misaligned);
// deflated entries own their inflated memory. Entries whose names do not end in ".npy"
// (and directories) are skipped. Errors: invalid_argument for a malformed archive or array,
// unsupported for encryption, multi-disk archives, other compression methods and dtypes.
TensorMap read_npz(const std::string& path, const NpzOptions& options = {});

// The same from a whole file image; `owner` keeps `bytes` alive for the views (null: the
// caller keeps them alive). `name` names the file in messages.
TensorMap parse_npz(std::span<const uint8_t> bytes, std::shared_ptr<const void> owner,
                    const std::string& name, const NpzOptions& options = {});

}  // namespace parley::io

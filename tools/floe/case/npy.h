// Reading and writing float32 .npy files (format 1.0/2.0, little-endian, C order): the case
// folder's arrays. Small, and ours: no packaged C++ library reads .npy.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "floe/status.h"

namespace floe::tool {

// A logical, dense, C-order float32 array.
struct HostArray {
  std::vector<int64_t> shape;
  std::vector<float> data;

  int64_t numel() const;
};

Result<HostArray> read_npy(const std::string& path);
Status write_npy(const std::string& path, const HostArray& array);

}  // namespace floe::tool

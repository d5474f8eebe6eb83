// Reading and writing float32 .npy files (format 1.0/2.0, little-endian, C order): the case
// folder's arrays. Small, and ours: no packaged C++ library reads .npy.
#pragma once

#include <cstdint>
#include <istream>
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

// Refuses, with the path and the field, anything but a float32 C-order array whose data is
// exactly as long as the header says; reads never go past that size (a link to an endless
// file fails, not runs out of memory).
Result<HostArray> read_npy(const std::string& path);
// The same from a stream (the fuzzer's entry); `path` only names it in messages.
Result<HostArray> read_npy(std::istream& in, const std::string& path);
// "(2, 3)", "(4,)", "()": numpy's way of writing a shape.
std::string shape_text(const std::vector<int64_t>& shape);
Status write_npy(const std::string& path, const HostArray& array);

}  // namespace floe::tool

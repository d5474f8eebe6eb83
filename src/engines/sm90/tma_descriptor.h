// TMA tensor maps for the sm90 kernels. A tensor map holds the tensor's base address, which
// arrives only with an execute's Arguments, so launch() encodes them per call: a host-only
// driver call (no allocation, no sync), resolved once through the runtime's driver entry point
// so that floe needs no link to libcuda.
#pragma once

#include <cstdint>
#include <string>

namespace floe::detail::sm90 {

// Bit-compatible with CUtensorMap (128 bytes; CUDA 13 declares it 128-byte aligned); kept opaque so
// that Params stay plain data that host code builds without <cuda.h>.
struct alignas(128) TmaDescriptor {
  uint64_t words[16];
};

// A [b, h, s, d] tensor of 2-byte elements seen by a tile of `box_rows` rows and all `d` columns,
// loaded with the 128-byte swizzle in chunks of 64 columns: dims {64, s, d / 64, h, b}, so one
// load fills a tile laid out as [d / 64][box_rows][64] (CuTe's K-major SW128 GMMA layout).
// Strides in elements; d a multiple of 64; every outer stride a multiple of 8 elements.
struct TmaTensor {
  const void* base = nullptr;
  int64_t b = 0, h = 0, s = 0, d = 0;
  int64_t stride_b = 0, stride_h = 0, stride_s = 0;
  int box_rows = 0;
  // Column chunks a box spans (0: all d / 64). The forward loads Q one consumer warpgroup's 64
  // rows at a time, a chunk a box, into its rows of the [d / 64][block_m][64] tile.
  int box_chunks = 0;
  bool bf16 = true;
};

// A [b, h, rows, cols] tensor of 2-byte elements with a unit column stride (a bias), seen by boxes
// of 64 columns x box_rows rows with the 128-byte swizzle: one box fills [box_rows][64] as CuTe's
// K-major SW128 layout, zero-filled past `rows` and `cols`. Strides in elements, multiples of 8
// in every dim of size above 1 (a dim of size 1 may carry any stride).
struct TmaMatrix {
  const void* base = nullptr;
  int64_t b = 0, h = 0, rows = 0, cols = 0;
  int64_t stride_b = 0, stride_h = 0, stride_row = 0;
  int box_rows = 0;
  bool bf16 = true;
};

// Empty when the driver's encoder is available (resolved once, thread-safe); else why not.
std::string tma_encoder_status();
// False on a driver error (the tensor map is then unusable).
bool encode_tma(const TmaTensor& t, TmaDescriptor* out);
bool encode_tma(const TmaMatrix& t, TmaDescriptor* out);

}  // namespace floe::detail::sm90

#include "engines/sm90/tma_descriptor.h"

#include <cuda.h>
#include <cudaTypedefs.h>
#include <cuda_runtime_api.h>

#include "engines/kernel_launch.h"

namespace floe::detail::sm90 {
namespace {

static_assert(sizeof(TmaDescriptor) == sizeof(CUtensorMap), "TmaDescriptor must be a CUtensorMap");
static_assert(alignof(TmaDescriptor) == alignof(CUtensorMap),
              "TmaDescriptor must be a CUtensorMap");

struct Encoder {
  PFN_cuTensorMapEncodeTiled_v12000 fn = nullptr;
  std::string error;
};

const Encoder& encoder() {
  static const Encoder e = [] {
    Encoder r;
    void* fn = nullptr;
    cudaDriverEntryPointQueryResult found = cudaDriverEntryPointSymbolNotFound;
    const cudaError_t err = cudaGetDriverEntryPointByVersion("cuTensorMapEncodeTiled", &fn, 12000,
                                                             cudaEnableDefault, &found);
    if (err != cudaSuccess || found != cudaDriverEntryPointSuccess || fn == nullptr) {
      cudaGetLastError();
      r.error = std::string("the driver has no cuTensorMapEncodeTiled (") +
                (err != cudaSuccess ? cudaGetErrorString(err) : "symbol not found") + ")";
    } else {
      r.fn = reinterpret_cast<PFN_cuTensorMapEncodeTiled_v12000>(fn);
    }
    return r;
  }();
  return e;
}

// One cuTensorMapEncodeTiled call. The encoder needs a current context, which a thread new to
// CUDA lacks (an execute on autograd's or a worker pool's thread): it gets one bound, as the
// runtime's first call on a thread would, and the call is made again.
template <class Call>
bool encode_on_this_thread(Call&& call) {
  return call() == CUDA_SUCCESS || (bind_thread_context() && call() == CUDA_SUCCESS);
}

}  // namespace

std::string tma_encoder_status() {
  return encoder().error;
}

bool encode_tma(const TmaTensor& t, TmaDescriptor* out) {
  const Encoder& e = encoder();
  if (e.fn == nullptr) return false;
  constexpr int64_t kChunk = 64;  // columns per 128-byte swizzle row
  const cuuint64_t dims[5] = {kChunk, static_cast<cuuint64_t>(t.s),
                              static_cast<cuuint64_t>(t.d / kChunk), static_cast<cuuint64_t>(t.h),
                              static_cast<cuuint64_t>(t.b)};
  // Byte strides of dims 1..4. A dim of size 1 may carry any stride; TMA still wants it 16-byte
  // aligned, so give it the chunk stride.
  auto bytes = [](int64_t elems, int64_t dim) {
    return static_cast<cuuint64_t>(dim > 1 ? elems * 2 : kChunk * 2);
  };
  const cuuint64_t strides[4] = {bytes(t.stride_s, t.s), static_cast<cuuint64_t>(kChunk * 2),
                                 bytes(t.stride_h, t.h), bytes(t.stride_b, t.b)};
  const cuuint32_t box[5] = {
      static_cast<cuuint32_t>(kChunk), static_cast<cuuint32_t>(t.box_rows),
      static_cast<cuuint32_t>(t.box_chunks > 0 ? t.box_chunks : t.d / kChunk), 1, 1};
  const cuuint32_t elem_strides[5] = {1, 1, 1, 1, 1};
  return encode_on_this_thread([&] {
    return e.fn(reinterpret_cast<CUtensorMap*>(out),
                t.bf16 ? CU_TENSOR_MAP_DATA_TYPE_BFLOAT16 : CU_TENSOR_MAP_DATA_TYPE_FLOAT16, 5,
                const_cast<void*>(t.base), dims, strides, box, elem_strides,
                CU_TENSOR_MAP_INTERLEAVE_NONE, CU_TENSOR_MAP_SWIZZLE_128B,
                CU_TENSOR_MAP_L2_PROMOTION_L2_256B, CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE);
  });
}

bool encode_tma(const TmaMatrix& t, TmaDescriptor* out) {
  const Encoder& e = encoder();
  if (e.fn == nullptr) return false;
  constexpr int64_t kChunk = 64;  // columns per box: one 128-byte swizzle row
  const cuuint64_t dims[4] = {static_cast<cuuint64_t>(t.cols), static_cast<cuuint64_t>(t.rows),
                              static_cast<cuuint64_t>(t.h), static_cast<cuuint64_t>(t.b)};
  auto bytes = [](int64_t elems, int64_t dim) {
    return static_cast<cuuint64_t>(dim > 1 ? elems * 2 : kChunk * 2);
  };
  const cuuint64_t strides[3] = {bytes(t.stride_row, t.rows), bytes(t.stride_h, t.h),
                                 bytes(t.stride_b, t.b)};
  const cuuint32_t box[4] = {static_cast<cuuint32_t>(kChunk), static_cast<cuuint32_t>(t.box_rows),
                             1, 1};
  const cuuint32_t elem_strides[4] = {1, 1, 1, 1};
  return encode_on_this_thread([&] {
    return e.fn(reinterpret_cast<CUtensorMap*>(out),
                t.bf16 ? CU_TENSOR_MAP_DATA_TYPE_BFLOAT16 : CU_TENSOR_MAP_DATA_TYPE_FLOAT16, 4,
                const_cast<void*>(t.base), dims, strides, box, elem_strides,
                CU_TENSOR_MAP_INTERLEAVE_NONE, CU_TENSOR_MAP_SWIZZLE_128B,
                CU_TENSOR_MAP_L2_PROMOTION_L2_256B, CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE);
  });
}

}  // namespace floe::detail::sm90

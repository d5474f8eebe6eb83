#pragma once

#if defined(__CUDACC__)
#define FLOE_HD __host__ __device__ __forceinline__
#else
#define FLOE_HD inline
#endif

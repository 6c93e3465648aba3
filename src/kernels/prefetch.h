// Software prefetch of weights streamed from memory, shared by the panel tiles
// (panel_gemm.h, panel_iq4_gemm.h) and the grid types' row decoder (iq_grid_simd.h).
//
// Every kernel streams its weights from memory once per call, and the hardware prefetchers
// alone left the loads exposed: compute and memory time added up. Asking for the bytes this
// far ahead of the ones being computed overlaps the two, for one token as for many.
// Measured on this project's Xeon (docs/kernels.md, "Prefetch on the Xeon"), one thread,
// 8192x2048: one q6_K token 6.1 -> 11 GB/s, one q4_0 token 11.1 -> 13.1 GB/s, 64 q8_0 tokens
// 110 -> 380 GFLOP/s, 8 q4_K tokens 143 -> 210 GFLOP/s, against prefetchnta 4 KiB ahead for
// batched tiles and one q6_K token only (tuned on a Zen 4). Into L2 (locality 2), 16 KiB
// ahead.
#pragma once

#include <cstddef>

namespace herd::kernels {

inline constexpr size_t kPrefetchDistance = 16384;

// Prefetches the cache lines of [p, p + bytes) kPrefetchDistance bytes further on. Past the
// end of a buffer it asks for nothing harmful: a prefetch never faults.
inline void prefetch_ahead(const void* p, size_t bytes) {
  const char* ahead = static_cast<const char*>(p) + kPrefetchDistance;
  for (size_t off = 0; off < bytes; off += 64) __builtin_prefetch(ahead + off, 0, 2);
}

}  // namespace herd::kernels

// The SIMD gemm of the grid-based types, written once over an ISA's dot product (`Dot`)
// and a per-type decoder ("unpacker x tile", as panel_gemm.h): a decoder turns a GGUF
// super-block into 256 int8 weights plus its scales (`Decoded`), and the dot runs T tokens
// against a decoded row. A token's result must not depend on T (matmul_test checks it).
//
// Why decode rows instead of repacking panels as the other quantized types do: the weights
// are grid indices, one per 4 or 8 values; splitting them into panel lanes would still need
// the table lookups at run time, and a repacked copy of a 1T-parameter model is not an
// option. The decoded row lives in the per-thread scratch: one row for one token (stays in
// L1), a chunk of 16 rows for several tokens (L2), so a row is decoded once per call.
//
// Included only by the ISA files (iq_grid_<isa>.cpp); internal linkage, like panel_gemm.h.
#pragma once

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <utility>

#include "kernels/activations.h"
#include "kernels/kernel_table.h"
#include "kernels/prefetch.h"
#include "quant/iq_grid_quants.h"

namespace herd::kernels::iq_grid {
namespace {

// NEON stores weights as q + kBias (2..126 for |q| <= 62), the bias taken back per 16-value
// sub-block through the activations' block sums: sum q x = sum (q + 64) x - 64 bsum. (The
// x86 decoders store them as their one-token kernels read them: see iq_grid_x86.h.)
inline constexpr int kBias = 64;
inline constexpr int kBiasShift = 6;

// One super-block decoded:  x[i] = d * scale[i / 16] * w[i], w[i] read from byte q[i] as
// the ISA stores it (NEON: q[i] - kBias; x86: iq_grid_x86.h)
//   0                 256                288     292    320
//   | q[256] bytes    | scale[16] int16  | d f32 | pad  |
struct alignas(64) Decoded {
  uint8_t q[256];
  int16_t scale[16];
  float d;
  uint8_t pad[28];
};
static_assert(sizeof(Decoded) == 320);

// Rows decoded together when a call has several tokens.
inline constexpr int64_t kChunkRows = 16;

inline size_t decoded_scratch_bytes(int64_t cols) {
  return size_t(kChunkRows * (cols / 256)) * sizeof(Decoded);
}

// Little-endian fields of a GGUF block at any alignment.
inline uint32_t load_u32(const uint8_t* p) {
  uint32_t v;
  std::memcpy(&v, p, 4);
  return v;
}
inline uint16_t load_u16(const uint8_t* p) {
  uint16_t v;
  std::memcpy(&v, p, 2);
  return v;
}

// y[t * y_stride] = dot of decoded row w with token t of act, for t < T.
template <class Dot, int... N>
void dot_tokens(int n, const Decoded* w, int64_t n_blocks, const uint8_t* act, size_t stride,
                float* y, int64_t y_stride, std::integer_sequence<int, N...>) {
  ((n == N + 1 ? Dot::template run<N + 1>(w, n_blocks, act, stride, y, y_stride) : void()), ...);
}

template <class Dot, class Decoder>
void grid_gemm(const GemmArgs& a) {
  using Block = typename Decoder::Block;
  const int64_t n_blocks = a.cols / 256;
  const size_t row_stride = size_t(n_blocks) * sizeof(Block);
  Decoded* rows = reinterpret_cast<Decoded*>(a.scratch);  // [kChunkRows][n_blocks]
  const int64_t chunk = a.n_tokens == 1 ? 1 : kChunkRows;
  for (int64_t r0 = a.row_begin; r0 < a.row_end; r0 += chunk) {
    const int64_t n_rows = std::min(chunk, a.row_end - r0);
    for (int64_t i = 0; i < n_rows; ++i) {
      const Block* blocks = reinterpret_cast<const Block*>(a.weights + size_t(r0 + i) * row_stride);
      for (int64_t b = 0; b < n_blocks; ++b) {
        prefetch_ahead(&blocks[b], sizeof(Block));
        Decoder::decode(blocks[b], rows[i * n_blocks + b]);
      }
    }
    for (int64_t t0 = 0; t0 < a.n_tokens; t0 += Dot::kMaxTokens) {
      const int n = int(std::min<int64_t>(Dot::kMaxTokens, a.n_tokens - t0));
      for (int64_t i = 0; i < n_rows; ++i) {
        dot_tokens<Dot>(n, rows + i * n_blocks, n_blocks,
                        a.activations + size_t(t0) * a.activation_stride, a.activation_stride,
                        a.y + t0 * a.y_stride + r0 + i, a.y_stride,
                        std::make_integer_sequence<int, Dot::kMaxTokens>{});
      }
    }
  }
}

// The token's ActQ8K block b.
inline const ActQ8K& act_block(const uint8_t* act, size_t stride, int t, int64_t b) {
  return reinterpret_cast<const ActQ8K*>(act + size_t(t) * stride)[b];
}

}  // namespace
}  // namespace herd::kernels::iq_grid

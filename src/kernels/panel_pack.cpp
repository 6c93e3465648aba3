// Repacking GGUF rows into 16-row panels (layouts in panel_layout.h). Plain C++ for the
// baseline CPU: packing runs once per matrix, at load time.
#include <cmath>
#include <cstring>

#include "kernels/panel_layout.h"
#include "quant/blocks.h"
#include "quant/float16.h"
#include "quant/k_quants.h"
#include "quant/legacy_quants.h"

namespace herd::kernels {
namespace {

using namespace quant;

// Calls fill(panel_block, row_in_panel, gguf_block) for every real row of every panel
// block; the padding rows past `rows` stay zero (a zero scale makes them contribute 0).
template <typename Panel, typename Block, typename Fill>
void pack_panels(const MatrixView& w, int64_t block_size, uint8_t* dst, Fill fill) {
  const int64_t n_blocks = w.cols / block_size;
  const int64_t n_panels = (w.rows + kPanelRows - 1) / kPanelRows;
  const size_t row_stride = size_t(n_blocks) * sizeof(Block);
  Panel* out = reinterpret_cast<Panel*>(dst);  // [n_panels][n_blocks]
  std::memset(out, 0, size_t(n_panels * n_blocks) * sizeof(Panel));
  for (int64_t p = 0; p < n_panels; ++p) {
    for (int r = 0; r < kPanelRows && p * kPanelRows + r < w.rows; ++r) {
      const Block* row =
          reinterpret_cast<const Block*>(w.data + size_t(p * kPanelRows + r) * row_stride);
      for (int64_t b = 0; b < n_blocks; ++b) fill(out[p * n_blocks + b], r, row[b]);
    }
  }
}

template <typename Panel>
size_t bytes_of_panels(int64_t rows, int64_t cols, int64_t block_size) {
  return size_t((rows + kPanelRows - 1) / kPanelRows * (cols / block_size)) * sizeof(Panel);
}

// Lane r of a lane vector: the 4 bytes of row r.
uint8_t* lane(uint8_t* vector, int r) {
  return vector + 4 * r;
}

// q5_0 / q5_1 fifth bits: GGUF bit k of qh is value k; the panel wants bit g of byte i to
// be value 4g + i.
void pack_fifth_bits(const uint8_t* gguf_qh, uint8_t* lane_bytes) {
  uint32_t qh;
  std::memcpy(&qh, gguf_qh, 4);
  for (int i = 0; i < 4; ++i) {
    uint8_t byte = 0;
    for (int g = 0; g < 8; ++g) byte |= uint8_t(((qh >> (4 * g + i)) & 1) << g);
    lane_bytes[i] = byte;
  }
}

template <typename Panel, typename Block>
void pack_nibbles(Panel& panel, int r, const Block& block) {
  for (int j = 0; j < 4; ++j) std::memcpy(lane(panel.qs[j], r), block.qs + 4 * j, 4);
}

// Unsigned values 0..2^bits-1 of one K super-block, in element order.
void values_of(const BlockQ2_K& b, uint8_t* q) {
  for (int h = 0; h < 2; ++h)
    for (int j = 0; j < 4; ++j)
      for (int l = 0; l < 32; ++l) q[128 * h + 32 * j + l] = (b.qs[32 * h + l] >> (2 * j)) & 3;
}

void values_of(const BlockQ3_K& b, uint8_t* q) {
  for (int h = 0; h < 2; ++h)
    for (int j = 0; j < 4; ++j)
      for (int l = 0; l < 32; ++l) {
        const int i = 128 * h + 32 * j + l;
        q[i] =
            uint8_t(((b.qs[32 * h + l] >> (2 * j)) & 3) | ((b.hmask[i % 32] >> (i / 32)) & 1) << 2);
      }
}

void values_of(const BlockQ6_K& b, uint8_t* q) {
  for (int h = 0; h < 2; ++h) {
    const uint8_t* ql = b.ql + 64 * h;
    const uint8_t* qh = b.qh + 32 * h;
    for (int l = 0; l < 32; ++l) {
      q[128 * h + l] = uint8_t((ql[l] & 15) | ((qh[l] >> 0) & 3) << 4);
      q[128 * h + l + 32] = uint8_t((ql[l + 32] & 15) | ((qh[l] >> 2) & 3) << 4);
      q[128 * h + l + 64] = uint8_t((ql[l] >> 4) | ((qh[l] >> 4) & 3) << 4);
      q[128 * h + l + 96] = uint8_t((ql[l + 32] >> 4) | ((qh[l] >> 6) & 3) << 4);
    }
  }
}

// For sub-16 types: chunk c (32 values), lane r. Value of group g, element i: q[32c+4g+i].
// Two-bit fields: ql[e] bits 2j..2j+1 = bits 0-1 of group 4e+j.
void pack_two_bit_fields(const uint8_t* q, int c, int r, uint8_t (*ql)[64]) {
  for (int e = 0; e < 2; ++e)
    for (int i = 0; i < 4; ++i) {
      uint8_t byte = 0;
      for (int j = 0; j < 4; ++j) byte |= uint8_t((q[32 * c + 4 * (4 * e + j) + i] & 3) << (2 * j));
      lane(ql[e], r)[i] = byte;
    }
}

void pack_k_scale_pairs(const uint8_t* scales, int r, uint8_t (*sc)[32], uint8_t (*mn)[32]) {
  for (int s = 0; s < 8; ++s) {
    uint8_t scale, min;
    get_scale_min_k4(s, scales, &scale, &min);
    sc[s / 2][2 * r + s % 2] = scale;
    mn[s / 2][2 * r + s % 2] = min;
  }
}

}  // namespace

// ---- legacy types ---------------------------------------------------------------------------

size_t q4_0_panel_bytes(int64_t rows, int64_t cols) {
  return bytes_of_panels<PanelQ4_0>(rows, cols, kQK);
}
void pack_q4_0(const MatrixView& w, uint8_t* dst) {
  pack_panels<PanelQ4_0, BlockQ4_0>(w, kQK, dst, [](PanelQ4_0& p, int r, const BlockQ4_0& b) {
    p.d[r] = b.d;
    pack_nibbles(p, r, b);
  });
}

size_t q4_1_panel_bytes(int64_t rows, int64_t cols) {
  return bytes_of_panels<PanelQ4_1>(rows, cols, kQK);
}
void pack_q4_1(const MatrixView& w, uint8_t* dst) {
  pack_panels<PanelQ4_1, BlockQ4_1>(w, kQK, dst, [](PanelQ4_1& p, int r, const BlockQ4_1& b) {
    p.d[r] = b.d;
    p.m[r] = b.m;
    pack_nibbles(p, r, b);
  });
}

size_t q5_0_panel_bytes(int64_t rows, int64_t cols) {
  return bytes_of_panels<PanelQ5_0>(rows, cols, kQK);
}
void pack_q5_0(const MatrixView& w, uint8_t* dst) {
  pack_panels<PanelQ5_0, BlockQ5_0>(w, kQK, dst, [](PanelQ5_0& p, int r, const BlockQ5_0& b) {
    p.d[r] = b.d;
    pack_fifth_bits(b.qh, lane(p.qh, r));
    pack_nibbles(p, r, b);
  });
}

size_t q5_1_panel_bytes(int64_t rows, int64_t cols) {
  return bytes_of_panels<PanelQ5_1>(rows, cols, kQK);
}
void pack_q5_1(const MatrixView& w, uint8_t* dst) {
  pack_panels<PanelQ5_1, BlockQ5_1>(w, kQK, dst, [](PanelQ5_1& p, int r, const BlockQ5_1& b) {
    p.d[r] = b.d;
    p.m[r] = b.m;
    pack_fifth_bits(b.qh, lane(p.qh, r));
    pack_nibbles(p, r, b);
  });
}

size_t q8_0_panel_bytes(int64_t rows, int64_t cols) {
  return bytes_of_panels<PanelQ8_0>(rows, cols, kQK);
}
void pack_q8_0(const MatrixView& w, uint8_t* dst) {
  pack_panels<PanelQ8_0, BlockQ8_0>(w, kQK, dst, [](PanelQ8_0& p, int r, const BlockQ8_0& b) {
    p.d[r] = b.d;
    for (int g = 0; g < 8; ++g)
      std::memcpy(lane(reinterpret_cast<uint8_t*>(p.qs[g]), r), b.qs + 4 * g, 4);
  });
}

// ---- K-quants -------------------------------------------------------------------------------

size_t q2_k_panel_bytes(int64_t rows, int64_t cols) {
  return bytes_of_panels<PanelQ2_K>(rows, cols, kQK_K);
}
void pack_q2_k(const MatrixView& w, uint8_t* dst) {
  pack_panels<PanelQ2_K, BlockQ2_K>(w, kQK_K, dst, [](PanelQ2_K& p, int r, const BlockQ2_K& b) {
    p.d[r] = b.d;
    p.dmin[r] = b.dmin;
    uint8_t q[kQK_K];
    values_of(b, q);
    for (int c = 0; c < 8; ++c) {
      p.scales[c][2 * r] = b.scales[2 * c];
      p.scales[c][2 * r + 1] = b.scales[2 * c + 1];
      pack_two_bit_fields(q, c, r, p.ql[c]);
    }
  });
}

size_t q3_k_panel_bytes(int64_t rows, int64_t cols) {
  return bytes_of_panels<PanelQ3_K>(rows, cols, kQK_K);
}
void pack_q3_k(const MatrixView& w, uint8_t* dst) {
  pack_panels<PanelQ3_K, BlockQ3_K>(w, kQK_K, dst, [](PanelQ3_K& p, int r, const BlockQ3_K& b) {
    p.d[r] = b.d;
    uint8_t q[kQK_K];
    values_of(b, q);
    for (int c = 0; c < 8; ++c) {
      p.scales[c][2 * r] = int8_t(get_scale_k3(2 * c, b.scales));
      p.scales[c][2 * r + 1] = int8_t(get_scale_k3(2 * c + 1, b.scales));
      pack_two_bit_fields(q, c, r, p.chunks[c].ql);
      for (int i = 0; i < 4; ++i) {
        uint8_t byte = 0;
        for (int g = 0; g < 8; ++g) byte |= uint8_t(((q[32 * c + 4 * g + i] >> 2) & 1) << g);
        lane(p.chunks[c].qh, r)[i] = byte;
      }
    }
  });
}

size_t q4_k_panel_bytes(int64_t rows, int64_t cols) {
  return bytes_of_panels<PanelQ4_K>(rows, cols, kQK_K);
}
void pack_q4_k(const MatrixView& w, uint8_t* dst) {
  pack_panels<PanelQ4_K, BlockQ4_K>(w, kQK_K, dst, [](PanelQ4_K& p, int r, const BlockQ4_K& b) {
    p.d[r] = b.d;
    p.dmin[r] = b.dmin;
    pack_k_scale_pairs(b.scales, r, p.scales, p.mins);
    for (int c = 0; c < 4; ++c)
      for (int j = 0; j < 8; ++j) std::memcpy(lane(p.qs[c][j], r), b.qs + 32 * c + 4 * j, 4);
  });
}

size_t q5_k_panel_bytes(int64_t rows, int64_t cols) {
  return bytes_of_panels<PanelQ5_K>(rows, cols, kQK_K);
}
void pack_q5_k(const MatrixView& w, uint8_t* dst) {
  pack_panels<PanelQ5_K, BlockQ5_K>(w, kQK_K, dst, [](PanelQ5_K& p, int r, const BlockQ5_K& b) {
    p.d[r] = b.d;
    p.dmin[r] = b.dmin;
    pack_k_scale_pairs(b.scales, r, p.scales, p.mins);
    for (int c = 0; c < 4; ++c) {
      for (int j = 0; j < 8; ++j) std::memcpy(lane(p.chunks[c].qs[j], r), b.qs + 32 * c + 4 * j, 4);
      // Value v = 64c + 32e + 4j + i has its fifth bit at bit v / 32 of GGUF qh[v % 32].
      for (int e = 0; e < 2; ++e)
        for (int i = 0; i < 4; ++i) {
          uint8_t byte = 0;
          for (int j = 0; j < 8; ++j) byte |= uint8_t(((b.qh[4 * j + i] >> (2 * c + e)) & 1) << j);
          lane(p.chunks[c].qh[e], r)[i] = byte;
        }
    }
  });
}

size_t q6_k_panel_bytes(int64_t rows, int64_t cols) {
  return bytes_of_panels<PanelQ6_K>(rows, cols, kQK_K);
}
void pack_q6_k(const MatrixView& w, uint8_t* dst) {
  pack_panels<PanelQ6_K, BlockQ6_K>(w, kQK_K, dst, [](PanelQ6_K& p, int r, const BlockQ6_K& b) {
    p.d[r] = b.d;
    uint8_t q[kQK_K];
    values_of(b, q);
    for (int c = 0; c < 8; ++c) {
      p.scales[c][2 * r] = b.scales[2 * c];
      p.scales[c][2 * r + 1] = b.scales[2 * c + 1];
      const uint8_t* v = q + 32 * c;  // group g, element i: v[4g + i]
      for (int i = 0; i < 4; ++i) {
        for (int j = 0; j < 4; ++j) {
          lane(p.chunks[c].ql[j], r)[i] =
              uint8_t((v[4 * j + i] & 15) | (v[4 * (j + 4) + i] & 15) << 4);
        }
        for (int e = 0; e < 2; ++e) {
          uint8_t byte = 0;
          for (int j = 0; j < 4; ++j) byte |= uint8_t((v[4 * (4 * e + j) + i] >> 4) << (2 * j));
          lane(p.chunks[c].qh[e], r)[i] = byte;
        }
      }
    }
  });
}

}  // namespace herd::kernels

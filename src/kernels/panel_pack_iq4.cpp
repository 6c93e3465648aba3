// Repacking mxfp4 and iq4_xs rows into panels (layouts in panel_iq4.h). Runs once per
// matrix, at load time.
#include <cstring>

#include "kernels/panel_iq4.h"
#include "kernels/panel_layout.h"
#include "quant/blocks.h"
#include "quant/iq4_quants.h"

namespace herd::kernels {
namespace {

using namespace quant;

// Calls fill(panel_block, row_in_panel, gguf_block) for every real row of every panel
// block; padding rows stay zero (scale 0 or e = 0: they contribute 0).
template <typename Panel, typename Block, typename Fill>
void pack_panels(const MatrixView& w, int64_t block_size, uint8_t* dst, Fill fill) {
  const int64_t n_blocks = w.cols / block_size;
  const int64_t n_panels = (w.rows + kPanelRows - 1) / kPanelRows;
  const size_t row_stride = size_t(n_blocks) * sizeof(Block);
  Panel* out = reinterpret_cast<Panel*>(dst);  // [n_panels][n_blocks]
  std::memset(out, 0, size_t(n_panels * n_blocks) * sizeof(Panel));
  for (int64_t p = 0; p < n_panels; ++p) {
    for (int r = 0; r < kPanelRows && p * kPanelRows + r < w.rows; ++r) {
      const uint8_t* row = w.data + size_t(p * kPanelRows + r) * row_stride;
      for (int64_t b = 0; b < n_blocks; ++b) {
        Block block;  // mxfp4 blocks are 17 bytes: a row's blocks are unaligned
        std::memcpy(&block, row + size_t(b) * sizeof(Block), sizeof(Block));
        fill(out[p * n_blocks + b], r, block);
      }
    }
  }
}

template <typename Panel>
size_t bytes_of_panels(int64_t rows, int64_t cols, int64_t block_size) {
  return size_t((rows + kPanelRows - 1) / kPanelRows * (cols / block_size)) * sizeof(Panel);
}

// Nibble vector j of a 16-byte group of nibbles: lane r gets bytes 4j..4j+3.
void pack_nibbles(const uint8_t* qs, int r, uint8_t (*vectors)[64]) {
  for (int j = 0; j < 4; ++j) std::memcpy(vectors[j] + 4 * r, qs + 4 * j, 4);
}

}  // namespace

size_t mxfp4_panel_bytes(int64_t rows, int64_t cols) {
  return bytes_of_panels<PanelMXFP4>(rows, cols, kQK);
}
void pack_mxfp4(const MatrixView& w, uint8_t* dst) {
  pack_panels<PanelMXFP4, BlockMXFP4>(w, kQK, dst, [](PanelMXFP4& p, int r, const BlockMXFP4& b) {
    p.e[r] = b.e;
    pack_nibbles(b.qs, r, p.qs);
  });
}

size_t iq4_xs_panel_bytes(int64_t rows, int64_t cols) {
  return bytes_of_panels<PanelIQ4_XS>(rows, cols, kQK_K);
}
void pack_iq4_xs(const MatrixView& w, uint8_t* dst) {
  pack_panels<PanelIQ4_XS, BlockIQ4_XS>(
      w, kQK_K, dst, [](PanelIQ4_XS& p, int r, const BlockIQ4_XS& b) {
        p.d[r] = b.d;
        for (int s = 0; s < 8; ++s) {
          p.scales[s / 2][2 * r + s % 2] = int8_t(iq4_xs_scale(b, s));
          pack_nibbles(b.qs + 16 * s, r, p.qs[s]);
        }
      });
}

}  // namespace herd::kernels

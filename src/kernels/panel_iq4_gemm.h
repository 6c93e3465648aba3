// The panel kernels of iq4_nl, mxfp4 and iq4_xs, written once over an ISA's primitives
// (panel_gemm.h lists them) plus three for table lookups:
//   Q8Table, table_q8(levels): 16 int8 levels in the form lookup_q8 wants;
//   lookup_q8(table, idx): the levels of the index bytes idx (each 0..15), as signed
//     weights ready for dot_q8 (Q8W: biased by kQ8Offset on AVX-512, with their
//     magnitudes on AVX2);
//   load_e8m0(e): 16 E8M0 bytes as the floats 2^(e - 127) (bits e << 23).
// A 4-bit index costs one byte shuffle; the dot products are then q8_0's: per 4-byte
// group one vpdpbusd (AVX-512 VNNI), vpsignb + vpmaddubsw + vpmaddwd (AVX2), or sdot.
//
// Included only by the ISA files, after panel_gemm.h; internal linkage like it.
#pragma once

#include <cstdint>

#include "kernels/activations.h"
#include "kernels/panel_gemm.h"
#include "kernels/panel_iq4.h"
#include "kernels/panel_layout.h"
#include "quant/iq4_quants.h"

namespace herd::kernels {
namespace {

// The 8 groups of a 32-value block (or iq4_xs sub-block) from its 4 nibble vectors.
template <class Ops>
inline void lookup_nibbles(const uint8_t (*qs)[64], const typename Ops::Q8Table& table,
                           typename Ops::Q8W* w) {
  const auto mask = Ops::set1_8(0x0f);
  for (int j = 0; j < 4; ++j) {
    const auto v = Ops::load(qs[j]);
    w[j] = Ops::lookup_q8(table, Ops::and_(v, mask));
    w[j + 4] = Ops::lookup_q8(table, Ops::and_(Ops::template srl16<4>(v), mask));
  }
}

// ---- legacy-tile unpackers (Q8_0-style activations with the offset sums) ----------------

template <class Ops>
struct UnpackIQ4_NL {
  using Panel = PanelQ4_0;  // the same GGUF block layout as q4_0
  using Act = ActQ8Offset;
  using W = typename Ops::Q8W;
  static constexpr int64_t kBlockValues = 32;
  static constexpr bool kHasMin = false;
  static constexpr int kOffset = Ops::kQ8Offset;
  static constexpr int kMaxWeight = 0;  // signed: U::dot per group
  static void weights(const Panel& p, W* w) {
    lookup_nibbles<Ops>(p.qs, Ops::table_q8(quant::kValuesIq4nl), w);
  }
  static typename Ops::I dot(typename Ops::I acc, W w, int32_t x4) {
    return Ops::dot_q8(acc, w, x4);
  }
  static typename Ops::F scale(const Panel& p) { return Ops::load_f16(p.d); }
};

template <class Ops>
struct UnpackMXFP4 : UnpackIQ4_NL<Ops> {
  using Panel = PanelMXFP4;
  using W = typename Ops::Q8W;
  static void weights(const Panel& p, W* w) {
    lookup_nibbles<Ops>(p.qs, Ops::table_q8(quant::kValuesMxfp4), w);
  }
  // 2^(e - 128): the levels are doubled E2M1 values.
  static typename Ops::F scale(const Panel& p) {
    return Ops::mul(Ops::load_e8m0(p.e), Ops::set1(0.5f));
  }
};

// ---- iq4_xs: 16 rows x T tokens over all super-blocks of the panel --------------------------

// Activations are Q8_K blocks (ActQ8K). Per sub-block s and token: the signed dot of its 8
// groups, started at -kQ8Offset * (sum of the sub-block's activations) to undo a biased
// ISA's offset, times the sub-block scale; per super-block, times d_w * d_x.
template <class Ops, int T>
void iq4_xs_tile(const PanelIQ4_XS* panel, int64_t n_blocks, const uint8_t* act, size_t act_stride,
                 float* y, int64_t y_stride, int valid_rows) {
  using I = typename Ops::I;
  const auto table = Ops::table_q8(quant::kValuesIq4nl);
  typename Ops::F acc[T];
  for (int t = 0; t < T; ++t) acc[t] = Ops::zerof();
  for (int64_t b = 0; b < n_blocks; ++b) {
    const PanelIQ4_XS& p = panel[b];
    I isum[T];
    for (int t = 0; t < T; ++t) isum[t] = Ops::zero();
    for (int s = 0; s < 8; ++s) {
      if (s % 2 == 0) prefetch_panel(p, s / 2, 4);
      typename Ops::Q8W w[8];
      lookup_nibbles<Ops>(p.qs[s], table, w);
      const I sc = signed_scale<Ops>(p, s / 2, s % 2);
      for (int t = 0; t < T; ++t) {
        const ActQ8K& a = reinterpret_cast<const ActQ8K*>(act + size_t(t) * act_stride)[b];
        const int8_t* x = a.qs + 32 * s;
        I sum = Ops::kQ8Offset != 0 ? Ops::set1_32(-Ops::kQ8Offset * a.bsum32[s]) : Ops::zero();
        for (int g = 0; g < 8; ++g)
          sum = Ops::dot_q8(sum, w[g], load_unaligned<int32_t>(x + 4 * g));
        isum[t] = Ops::add32(isum[t], Ops::mul32(sum, sc));
      }
    }
    const auto d = Ops::load_f16(p.d);
    for (int t = 0; t < T; ++t) {
      const ActQ8K& a = reinterpret_cast<const ActQ8K*>(act + size_t(t) * act_stride)[b];
      acc[t] = Ops::fma(Ops::mul(d, Ops::set1(a.d)), Ops::cvt(isum[t]), acc[t]);
    }
  }
  for (int t = 0; t < T; ++t) Ops::store(y + t * y_stride, acc[t], valid_rows);
}

template <class Ops>
struct UnpackIQ4_XS {
  using Panel = PanelIQ4_XS;
  static constexpr int64_t kBlockValues = 256;
};

template <class Ops, class U, int T>
struct Iq4XsTile {
  static void run(const PanelIQ4_XS* panel, int64_t n_blocks, const uint8_t* act, size_t act_stride,
                  float* y, int64_t y_stride, int valid_rows) {
    iq4_xs_tile<Ops, T>(panel, n_blocks, act, act_stride, y, y_stride, valid_rows);
  }
};

}  // namespace
}  // namespace herd::kernels

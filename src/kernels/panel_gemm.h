// The panel kernels, written once over an ISA's primitives (`Ops`, see x86_avx512.cpp for
// the reference list): unpackers turn a panel block into lane vectors of unsigned bytes,
// and two tile loops (legacy 32-blocks, K super-blocks) run T tokens against one unpacked
// block, so each block is unpacked once per T tokens ("unpacker x tile").
//
// Included only by the ISA files. Everything here has internal linkage (an unnamed
// namespace), so each ISA file gets its own copies compiled with its own flags and the
// linker can never pick, say, an AVX-512 copy of a helper for the AVX2 path.
//
// Ops provides, for 16 lanes (one panel's rows):
//   I  int32 x 16 (also seen as 64 bytes or 32 int16), F  float x 16
//   load(p) 64 bytes; set1_8(b); set1_32(v); zero(); and_, or_; srl16<n>, sll16<n>,
//   srl32<n>, sra32<n>, sll32<n> (shifts within 16/32-bit lanes); add32, sub32, mul32;
//   widen_u8(p) / widen_s8(p): 32 bytes to int16 x 32;
//   dot_u8(acc, w, x4): acc + per-lane 4-byte dot of unsigned w with the 4 signed bytes x4;
//   Q8W, prep_q8(v), dot_q8(acc, w, x4), kQ8Offset: the same for signed weights (an ISA
//     without a signed x signed byte dot stores them biased by kQ8Offset);
//   dot_i16(acc, a, x2): acc + per-lane dot of 2 int16 pairs of a with the pair x2;
//   kSumsInt16: true when the ISA's byte dot goes through int16 (AVX2 vpmaddubsw): it then
//     provides dot_u8_16(w, x4) (per-lane pairs of products as int16), add16 and
//     widen_sum16(acc, s) (acc + per-lane sum of the int16 pairs of s), and dot_u8_groups
//     below adds several groups in int16 before widening once;
//   load_f16(p) 16 halves to F; set1(f); fma(a, b, c); mul; cvt(I); store(y, F, n).
#pragma once

#include <cstdint>
#include <cstring>
#include <utility>

#include "kernels/activations.h"
#include "kernels/kernel_table.h"
#include "kernels/panel_layout.h"
#include "kernels/prefetch.h"

namespace herd::kernels {
namespace {

template <typename T>
inline T load_unaligned(const void* p) {
  T v;
  std::memcpy(&v, p, sizeof(T));
  return v;
}

// ---- legacy unpackers: one 32-value block -> 8 lane vectors (groups 0..7) ---------------

template <class Ops>
struct UnpackQ4_0 {
  using Panel = PanelQ4_0;
  using Act = ActQ8Offset;
  using W = typename Ops::I;
  static constexpr int64_t kBlockValues = 32;
  static constexpr bool kHasMin = false;
  static constexpr int kOffset = 8;
  static constexpr int kMaxWeight = 15;  // largest unpacked weight (see dot_u8_groups)
  static void weights(const Panel& p, W* w) {
    const auto mask = Ops::set1_8(0x0f);
    for (int j = 0; j < 4; ++j) {
      const auto v = Ops::load(p.qs[j]);
      w[j] = Ops::and_(v, mask);
      w[j + 4] = Ops::and_(Ops::template srl16<4>(v), mask);
    }
  }
  static typename Ops::I dot(typename Ops::I acc, W w, int32_t x4) {
    return Ops::dot_u8(acc, w, x4);
  }
};

template <class Ops>
struct UnpackQ4_1 : UnpackQ4_0<Ops> {
  using Panel = PanelQ4_1;
  using Act = ActQ8Min;
  using W = typename Ops::I;
  static constexpr bool kHasMin = true;
  static void weights(const Panel& p, W* w) {
    const auto mask = Ops::set1_8(0x0f);
    for (int j = 0; j < 4; ++j) {
      const auto v = Ops::load(p.qs[j]);
      w[j] = Ops::and_(v, mask);
      w[j + 4] = Ops::and_(Ops::template srl16<4>(v), mask);
    }
  }
};

// Bit `kFrom` of every byte of h moved to bit 4 (the fifth bit of a q5 value).
template <class Ops, int kFrom>
typename Ops::I fifth_bit(typename Ops::I h) {
  const auto bit4 = Ops::set1_8(0x10);
  if constexpr (kFrom < 4) return Ops::and_(Ops::template sll16<4 - kFrom>(h), bit4);
  if constexpr (kFrom == 4) return Ops::and_(h, bit4);
  if constexpr (kFrom > 4) return Ops::and_(Ops::template srl16<kFrom - 4>(h), bit4);
}

template <class Ops, typename Panel>
void unpack_q5(const Panel& p, typename Ops::I* w) {
  const auto mask = Ops::set1_8(0x0f);
  const auto h = Ops::load(p.qh);
  auto one = [&]<int j>() {
    const auto v = Ops::load(p.qs[j]);
    w[j] = Ops::or_(Ops::and_(v, mask), fifth_bit<Ops, j>(h));
    w[j + 4] = Ops::or_(Ops::and_(Ops::template srl16<4>(v), mask), fifth_bit<Ops, j + 4>(h));
  };
  one.template operator()<0>();
  one.template operator()<1>();
  one.template operator()<2>();
  one.template operator()<3>();
}

template <class Ops>
struct UnpackQ5_0 : UnpackQ4_0<Ops> {
  using Panel = PanelQ5_0;
  static constexpr int kOffset = 16;
  static constexpr int kMaxWeight = 31;
  static void weights(const Panel& p, typename Ops::I* w) { unpack_q5<Ops>(p, w); }
};

template <class Ops>
struct UnpackQ5_1 : UnpackQ4_1<Ops> {
  using Panel = PanelQ5_1;
  static constexpr int kMaxWeight = 31;
  static void weights(const Panel& p, typename Ops::I* w) { unpack_q5<Ops>(p, w); }
};

template <class Ops>
struct UnpackQ8_0 {
  using Panel = PanelQ8_0;
  using Act = ActQ8Offset;
  using W = typename Ops::Q8W;
  static constexpr int64_t kBlockValues = 32;
  static constexpr bool kHasMin = false;
  static constexpr int kOffset = Ops::kQ8Offset;
  static constexpr int kMaxWeight = 0;  // signed: U::dot per group
  static void weights(const Panel& p, W* w) {
    for (int g = 0; g < 8; ++g) w[g] = Ops::prep_q8(Ops::load(p.qs[g]));
  }
  static typename Ops::I dot(typename Ops::I acc, W w, int32_t x4) {
    return Ops::dot_q8(acc, w, x4);
  }
};

// ---- several groups of unsigned weights against one token's bytes ------------------------

// acc + the per-lane dot of groups w[0..N) with x[4g..4g+3] for group g; weights are at
// most kMaxWeight. An ISA whose byte dot goes through int16 (AVX2: vpmaddubsw, then
// vpmaddwd by ones to widen) sums as many groups in int16 as cannot overflow (each
// vpmaddubsw lane is at most 2 * kMaxWeight * 127: 8 groups of 4-bit weights, 4 of 5-bit,
// 2 of 6-bit) and widens once per run: about half the multiply-port work of widening every
// group. Activation bytes are at most 127 in magnitude (Q8 quantizers round x / (amax/127)).
// The integer sums are exact either way, so the result does not change by a bit.
template <class Ops, int kMaxWeight, int N>
inline typename Ops::I dot_u8_groups(typename Ops::I acc, const typename Ops::I* w,
                                     const int8_t* x) {
  if constexpr (Ops::kSumsInt16) {
    constexpr int kRun = 32767 / (2 * kMaxWeight * 127);
    static_assert(kRun >= 1);
    for (int g0 = 0; g0 < N; g0 += kRun) {
      auto s = Ops::dot_u8_16(w[g0], load_unaligned<int32_t>(x + 4 * g0));
      for (int g = g0 + 1; g < N && g < g0 + kRun; ++g)
        s = Ops::add16(s, Ops::dot_u8_16(w[g], load_unaligned<int32_t>(x + 4 * g)));
      acc = Ops::widen_sum16(acc, s);
    }
  } else {
    for (int g = 0; g < N; ++g) acc = Ops::dot_u8(acc, w[g], load_unaligned<int32_t>(x + 4 * g));
  }
  return acc;
}

// ---- software prefetch (prefetch.h) ------------------------------------------------------

// Part `part` of `parts` of the panel block kPrefetchDistance bytes after p (K-quant
// blocks are large: their prefetches are spread over the block's chunks).
template <typename Panel>
inline void prefetch_panel(const Panel& p, int part = 0, int parts = 1) {
  constexpr size_t kLines = (sizeof(Panel) + 63) / 64;
  const size_t first = kLines * part / parts, end = kLines * (part + 1) / parts;
  prefetch_ahead(reinterpret_cast<const char*>(&p) + 64 * first, 64 * (end - first));
}

// ---- legacy tile: 16 rows x T tokens, over all blocks of the panel ---------------------

// A block's weight scales: the unpacker's own when it has one (mxfp4's E8M0), else f16 d.
template <class Ops, class U>
inline typename Ops::F block_scale(const typename U::Panel& p) {
  if constexpr (requires { U::scale(p); }) {
    return U::scale(p);
  } else {
    return Ops::load_f16(p.d);
  }
}

// y[t * y_stride + r] for r < valid_rows, t < T.
template <class Ops, class U, int T>
void legacy_tile(const typename U::Panel* panel, int64_t n_blocks, const uint8_t* act,
                 size_t act_stride, float* y, int64_t y_stride, int valid_rows) {
  using Act = typename U::Act;
  typename Ops::F acc[T];
  for (int t = 0; t < T; ++t) acc[t] = Ops::zerof();
  for (int64_t b = 0; b < n_blocks; ++b) {
    const typename U::Panel& p = panel[b];
    prefetch_panel(p);
    typename U::W w[8];
    U::weights(p, w);
    const auto d = block_scale<Ops, U>(p);
    for (int t = 0; t < T; ++t) {
      const Act& a = reinterpret_cast<const Act*>(act + size_t(t) * act_stride)[b];
      typename Ops::I sum;
      if constexpr (U::kHasMin) {
        sum = Ops::zero();
      } else {
        sum = Ops::set1_32(a.offset_sum);
      }
      if constexpr (U::kMaxWeight > 0) {
        sum = dot_u8_groups<Ops, U::kMaxWeight, 8>(sum, w, a.qs);
      } else {
        for (int g = 0; g < 8; ++g) sum = U::dot(sum, w[g], load_unaligned<int32_t>(a.qs + 4 * g));
      }
      acc[t] = Ops::fma(Ops::mul(d, Ops::set1(a.d)), Ops::cvt(sum), acc[t]);
      if constexpr (U::kHasMin) acc[t] = Ops::fma(Ops::load_f16(p.m), Ops::set1(a.s), acc[t]);
    }
  }
  for (int t = 0; t < T; ++t) Ops::store(y + t * y_stride, acc[t], valid_rows);
}

// ---- K unpackers: sub-block e (0, 1) of chunk c -> kGroups lane vectors ------------------

enum class KCorrection {
  kMins,    // x = d * sc * q - dmin * mn: subtract dmin * sum(mn * bsum)
  kOffset,  // x = d * sc * (q - offset): subtract offset * sum(sc * bsum) inside the ints
};

template <class Ops>
struct UnpackQ4_K {
  using Panel = PanelQ4_K;
  using I = typename Ops::I;
  static constexpr int64_t kBlockValues = 256;
  static constexpr int kSubValues = 32, kGroups = 8, kChunks = 4;
  static constexpr KCorrection kCorrection = KCorrection::kMins;
  static constexpr bool kPairsOf32 = true;  // mins pair with bsum32
  static constexpr int kMaxWeight = 15;
  // Per-lane int32 scale of sub-block 2c+e.
  static I scale(const Panel& p, int c, int e) { return pair_half(Ops::widen_u8(p.scales[c]), e); }
  // int16 pairs (sub-block 2j, 2j+1) for the correction sum.
  static I correction_pairs(const Panel& p, int j) { return Ops::widen_u8(p.mins[j]); }
  template <int e>
  static void weights(const Panel& p, int c, I* w) {
    const auto mask = Ops::set1_8(0x0f);
    for (int j = 0; j < 8; ++j) {
      const auto v = Ops::load(p.qs[c][j]);
      w[j] = e == 0 ? Ops::and_(v, mask) : Ops::and_(Ops::template srl16<4>(v), mask);
    }
  }
  // The int32 lane of sub-block e from int16 pairs.
  static I pair_half(I pairs, int e) {
    return e == 0 ? Ops::template sra32<16>(Ops::template sll32<16>(pairs))
                  : Ops::template sra32<16>(pairs);
  }
};

template <class Ops>
struct UnpackQ5_K : UnpackQ4_K<Ops> {
  using Panel = PanelQ5_K;
  using I = typename Ops::I;
  static constexpr int kMaxWeight = 31;
  static I scale(const Panel& p, int c, int e) {
    return UnpackQ4_K<Ops>::pair_half(Ops::widen_u8(p.scales[c]), e);
  }
  static I correction_pairs(const Panel& p, int j) { return Ops::widen_u8(p.mins[j]); }
  template <int e>
  static void weights(const Panel& p, int c, I* w) {
    const auto mask = Ops::set1_8(0x0f);
    const auto h = Ops::load(p.chunks[c].qh[e]);
    auto one = [&]<int j>() {
      const auto v = Ops::load(p.chunks[c].qs[j]);
      const auto low = e == 0 ? Ops::and_(v, mask) : Ops::and_(Ops::template srl16<4>(v), mask);
      w[j] = Ops::or_(low, fifth_bit<Ops, j>(h));
    };
    one.template operator()<0>();
    one.template operator()<1>();
    one.template operator()<2>();
    one.template operator()<3>();
    one.template operator()<4>();
    one.template operator()<5>();
    one.template operator()<6>();
    one.template operator()<7>();
  }
};

// Bits 2j..2j+1 of every byte of h, moved to bits kTo..kTo+1.
template <class Ops, int j, int kTo>
typename Ops::I two_bits(typename Ops::I h) {
  const auto mask = Ops::set1_8(uint8_t(3 << kTo));
  constexpr int shift = kTo - 2 * j;
  if constexpr (shift > 0) return Ops::and_(Ops::template sll16<shift>(h), mask);
  if constexpr (shift == 0) return Ops::and_(h, mask);
  if constexpr (shift < 0) return Ops::and_(Ops::template srl16<-shift>(h), mask);
}

// Signed int8 scale pairs of q6_K / q3_K.
template <class Ops, typename Panel>
typename Ops::I signed_scale(const Panel& p, int c, int e) {
  return UnpackQ4_K<Ops>::pair_half(Ops::widen_s8(reinterpret_cast<const uint8_t*>(p.scales[c])),
                                    e);
}

template <class Ops>
struct UnpackQ6_K {
  using Panel = PanelQ6_K;
  using I = typename Ops::I;
  static constexpr int64_t kBlockValues = 256;
  static constexpr int kSubValues = 16, kGroups = 4, kChunks = 8;
  static constexpr KCorrection kCorrection = KCorrection::kOffset;
  static constexpr int kOffsetShift = 5;  // offset 32
  static constexpr bool kPairsOf32 = false;
  static constexpr int kMaxWeight = 63;
  static I scale(const Panel& p, int c, int e) { return signed_scale<Ops>(p, c, e); }
  static I correction_pairs(const Panel& p, int j) {
    return Ops::widen_s8(reinterpret_cast<const uint8_t*>(p.scales[j]));
  }
  template <int e>
  static void weights(const Panel& p, int c, I* w) {
    const auto mask = Ops::set1_8(0x0f);
    const auto h = Ops::load(p.chunks[c].qh[e]);
    auto one = [&]<int j>() {
      const auto v = Ops::load(p.chunks[c].ql[j]);
      const auto low = e == 0 ? Ops::and_(v, mask) : Ops::and_(Ops::template srl16<4>(v), mask);
      w[j] = Ops::or_(low, two_bits<Ops, j, 4>(h));
    };
    one.template operator()<0>();
    one.template operator()<1>();
    one.template operator()<2>();
    one.template operator()<3>();
  }
};

template <class Ops>
struct UnpackQ3_K {
  using Panel = PanelQ3_K;
  using I = typename Ops::I;
  static constexpr int64_t kBlockValues = 256;
  static constexpr int kSubValues = 16, kGroups = 4, kChunks = 8;
  static constexpr KCorrection kCorrection = KCorrection::kOffset;
  static constexpr int kOffsetShift = 2;  // offset 4
  static constexpr bool kPairsOf32 = false;
  static constexpr int kMaxWeight = 7;
  static I scale(const Panel& p, int c, int e) { return signed_scale<Ops>(p, c, e); }
  static I correction_pairs(const Panel& p, int j) {
    return Ops::widen_s8(reinterpret_cast<const uint8_t*>(p.scales[j]));
  }
  template <int e>
  static void weights(const Panel& p, int c, I* w) {
    const auto l = Ops::load(p.chunks[c].ql[e]);
    const auto h = Ops::load(p.chunks[c].qh);
    const auto bit2 = Ops::set1_8(0x04);
    auto one = [&]<int j>() {
      constexpr int g = 4 * e + j;  // bit g of h -> bit 2
      typename Ops::I high;
      if constexpr (g < 2) high = Ops::and_(Ops::template sll16<2 - g>(h), bit2);
      if constexpr (g == 2) high = Ops::and_(h, bit2);
      if constexpr (g > 2) high = Ops::and_(Ops::template srl16<g - 2>(h), bit2);
      w[j] = Ops::or_(two_bits<Ops, j, 0>(l), high);
    };
    one.template operator()<0>();
    one.template operator()<1>();
    one.template operator()<2>();
    one.template operator()<3>();
  }
};

template <class Ops>
struct UnpackQ2_K {
  using Panel = PanelQ2_K;
  using I = typename Ops::I;
  static constexpr int64_t kBlockValues = 256;
  static constexpr int kSubValues = 16, kGroups = 4, kChunks = 8;
  static constexpr KCorrection kCorrection = KCorrection::kMins;
  static constexpr bool kPairsOf32 = false;
  static constexpr int kMaxWeight = 3;
  static I scale(const Panel& p, int c, int e) {
    const auto pairs = Ops::and_(Ops::widen_u8(p.scales[c]), Ops::set1_8(0x0f));
    return UnpackQ4_K<Ops>::pair_half(pairs, e);
  }
  static I correction_pairs(const Panel& p, int j) {
    return Ops::template srl16<4>(Ops::widen_u8(p.scales[j]));
  }
  template <int e>
  static void weights(const Panel& p, int c, I* w) {
    const auto l = Ops::load(p.ql[c][e]);
    w[0] = two_bits<Ops, 0, 0>(l);
    w[1] = two_bits<Ops, 1, 0>(l);
    w[2] = two_bits<Ops, 2, 0>(l);
    w[3] = two_bits<Ops, 3, 0>(l);
  }
};

// ---- K tile: 16 rows x T tokens, over all super-blocks of the panel ----------------------

template <class Ops, class U, int T, int e>
void k_sub_block(const typename U::Panel& p, int c, const uint8_t* act, size_t act_stride,
                 int64_t b, typename Ops::I* isum) {
  typename Ops::I w[U::kGroups];
  U::template weights<e>(p, c, w);
  const auto sc = U::scale(p, c, e);
  for (int t = 0; t < T; ++t) {
    const ActQ8K& a = reinterpret_cast<const ActQ8K*>(act + size_t(t) * act_stride)[b];
    const int8_t* x = a.qs + (2 * c + e) * U::kSubValues;
    const auto sum = dot_u8_groups<Ops, U::kMaxWeight, U::kGroups>(Ops::zero(), w, x);
    isum[t] = Ops::add32(isum[t], Ops::mul32(sum, sc));
  }
}

template <class Ops, class U, int T>
void k_tile(const typename U::Panel* panel, int64_t n_blocks, const uint8_t* act, size_t act_stride,
            float* y, int64_t y_stride, int valid_rows) {
  typename Ops::F acc[T];
  for (int t = 0; t < T; ++t) acc[t] = Ops::zerof();
  constexpr int kPairs = U::kPairsOf32 ? 4 : 8;
  for (int64_t b = 0; b < n_blocks; ++b) {
    const typename U::Panel& p = panel[b];
    typename Ops::I isum[T];
    for (int t = 0; t < T; ++t) isum[t] = Ops::zero();
    for (int c = 0; c < U::kChunks; ++c) {
      prefetch_panel(p, c, U::kChunks);
      k_sub_block<Ops, U, T, 0>(p, c, act, act_stride, b, isum);
      k_sub_block<Ops, U, T, 1>(p, c, act, act_stride, b, isum);
    }
    const auto d = Ops::load_f16(p.d);
    for (int t = 0; t < T; ++t) {
      const ActQ8K& a = reinterpret_cast<const ActQ8K*>(act + size_t(t) * act_stride)[b];
      const int16_t* pairs = U::kPairsOf32 ? a.bsum32 : a.bsum16;
      auto correction = Ops::zero();
      for (int j = 0; j < kPairs; ++j) {
        correction = Ops::dot_i16(correction, U::correction_pairs(p, j),
                                  load_unaligned<int32_t>(pairs + 2 * j));
      }
      const auto dx = Ops::set1(a.d);
      if constexpr (U::kCorrection == KCorrection::kOffset) {
        isum[t] = Ops::sub32(isum[t], Ops::template sll32<U::kOffsetShift>(correction));
        acc[t] = Ops::fma(Ops::mul(d, dx), Ops::cvt(isum[t]), acc[t]);
      } else {
        acc[t] = Ops::fma(Ops::mul(d, dx), Ops::cvt(isum[t]), acc[t]);
        const auto dmin = Ops::load_f16(p.dmin);
        acc[t] = Ops::fma(Ops::mul(dmin, Ops::set1(-a.d)), Ops::cvt(correction), acc[t]);
      }
    }
  }
  for (int t = 0; t < T; ++t) Ops::store(y + t * y_stride, acc[t], valid_rows);
}

// ---- the gemm entry: panels x token tiles -----------------------------------------------------

template <class Ops, template <class, class, int> class Tile, class U, int kMaxTokens>
struct PanelGemm {
  using Panel = typename U::Panel;
  template <int T>
  static void tiles(const Panel* panel, int64_t n_blocks, const GemmArgs& a, int64_t row0,
                    int valid_rows, int64_t t0) {
    Tile<Ops, U, T>::run(panel, n_blocks, a.activations + size_t(t0) * a.activation_stride,
                         a.activation_stride, a.y + t0 * a.y_stride + row0, a.y_stride, valid_rows);
  }
  static void gemm(const GemmArgs& a) {
    const int64_t n_blocks = a.cols / U::kBlockValues;
    const Panel* panels = reinterpret_cast<const Panel*>(a.weights);
    for (int64_t row0 = a.row_begin; row0 < a.row_end; row0 += kPanelRows) {
      const Panel* panel = panels + (row0 / kPanelRows) * n_blocks;
      const int valid_rows = int(a.row_end - row0 < kPanelRows ? a.row_end - row0 : kPanelRows);
      int64_t t0 = 0;
      for (; t0 + kMaxTokens <= a.n_tokens; t0 += kMaxTokens) {
        tiles<kMaxTokens>(panel, n_blocks, a, row0, valid_rows, t0);
      }
      const int64_t rest = a.n_tokens - t0;
      // The remainder in one call of the right width (1 .. kMaxTokens - 1 tokens).
      [&]<int... N>(std::integer_sequence<int, N...>) {
        ((rest == N + 1 ? tiles<N + 1>(panel, n_blocks, a, row0, valid_rows, t0) : void()), ...);
      }
      (std::make_integer_sequence<int, kMaxTokens - 1>{});
    }
  }
};

template <class Ops, class U, int T>
struct LegacyTile {
  static void run(const typename U::Panel* panel, int64_t n_blocks, const uint8_t* act,
                  size_t act_stride, float* y, int64_t y_stride, int valid_rows) {
    legacy_tile<Ops, U, T>(panel, n_blocks, act, act_stride, y, y_stride, valid_rows);
  }
};

template <class Ops, class U, int T>
struct KTile {
  static void run(const typename U::Panel* panel, int64_t n_blocks, const uint8_t* act,
                  size_t act_stride, float* y, int64_t y_stride, int valid_rows) {
    k_tile<Ops, U, T>(panel, n_blocks, act, act_stride, y, y_stride, valid_rows);
  }
};

}  // namespace
}  // namespace herd::kernels

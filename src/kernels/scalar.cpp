// The scalar reference kernels: every weight type of the table, plain C++, read straight
// from the GGUF rows. Every SIMD kernel is tested against these, and they serve any type
// or CPU that has no SIMD kernel.
//
// Numerics follow ggml's vec_dot functions:
//   q4_0, q5_0, q8_0 x Q8_0 activations:  sum_b d_w * d_x * isum_b
//   q4_1, q5_1       x Q8_1 activations:  sum_b (d_w * d_x * isum_b + m_w * s_x)
//   iq4_nl, mxfp4    x Q8_0 activations:  as q4_0, with the type's levels as integers
//   q2_K ... q6_K    x Q8_K activations:  sum_B d_x * (d_w * sum_s sc_s * isum_s
//                                                      - dmin_w * sum_s mn_s * bsum_s)
//   iq4_xs           x Q8_K activations:  as the K-quants, levels as integers, no mins
// with exact integer sums inside a block. Float types differ from ggml on purpose:
//   f32, f16: activations stay f32 (ggml rounds them to f16 for f16 weights; converting
//             the weights instead costs the same and loses nothing), sums in double.
//   bf16:     activations rounded to bf16 as ggml does, so that the AVX-512 BF16 kernel
//             (vdpbf16ps, which needs bf16 on both sides) computes the same thing.
//
// Each gemm first decodes one weight row into integers (or floats) in the per-thread
// scratch, then runs every token against it, so the decoding is paid once per row.
#include <cstring>

#include "kernels/activations.h"
#include "kernels/iq_grid_kernels.h"
#include "kernels/kernel_table.h"
#include "quant/blocks.h"
#include "quant/float16.h"
#include "quant/iq4_quants.h"
#include "quant/k_quants.h"
#include "quant/legacy_quants.h"

namespace herd::kernels::scalar {
namespace {

using namespace quant;

// ---- activations -----------------------------------------------------------------------

template <typename Block, void (*kQuantize)(const float*, Block*, int64_t), int64_t kBlockSize>
struct BlockActivations {
  static size_t row_bytes(int64_t cols) { return size_t(cols / kBlockSize) * sizeof(Block); }
  static void quantize(const float* x, int64_t cols, uint8_t* dst) {
    kQuantize(x, reinterpret_cast<Block*>(dst), cols);
  }
};
using ActivationsQ8_0 = BlockActivations<BlockQ8_0, quantize_row_q8_0, kQK>;
using ActivationsQ8_1 = BlockActivations<BlockQ8_1, quantize_row_q8_1, kQK>;
using ActivationsQ8_K = BlockActivations<BlockQ8_K, quantize_row_q8_k, kQK_K>;

struct ActivationsF32 {
  static size_t row_bytes(int64_t cols) { return size_t(cols) * sizeof(float); }
  static void quantize(const float* x, int64_t cols, uint8_t* dst) {
    std::memcpy(dst, x, size_t(cols) * sizeof(float));
  }
};

// bf16-rounded values, kept as floats.
struct ActivationsBF16 {
  static size_t row_bytes(int64_t cols) { return size_t(cols) * sizeof(float); }
  static void quantize(const float* x, int64_t cols, uint8_t* dst) {
    float* out = reinterpret_cast<float*>(dst);
    for (int64_t i = 0; i < cols; ++i) out[i] = bf16_to_fp32(fp32_to_bf16(x[i]));
  }
};

// ---- legacy 32-element blocks ------------------------------------------------------------

// A weight block decoded: x[i] = d * q[i] + m.
struct LegacyInts {
  int8_t q[kQK];
  float d;
  float m;
};

void decode(const BlockQ4_0& b, LegacyInts& out) {
  for (int j = 0; j < kQK / 2; ++j) {
    out.q[j] = int8_t((b.qs[j] & 15) - 8);
    out.q[j + 16] = int8_t((b.qs[j] >> 4) - 8);
  }
  out.d = fp16_to_fp32(b.d);
  out.m = 0;
}

void decode(const BlockQ4_1& b, LegacyInts& out) {
  for (int j = 0; j < kQK / 2; ++j) {
    out.q[j] = int8_t(b.qs[j] & 15);
    out.q[j + 16] = int8_t(b.qs[j] >> 4);
  }
  out.d = fp16_to_fp32(b.d);
  out.m = fp16_to_fp32(b.m);
}

uint32_t load_u32(const uint8_t* p) {
  return uint32_t(p[0]) | uint32_t(p[1]) << 8 | uint32_t(p[2]) << 16 | uint32_t(p[3]) << 24;
}

// The 5-bit values of a q5 block, 0..31.
void decode_q5(const uint8_t* qh_bytes, const uint8_t* qs, int8_t* q) {
  const uint32_t qh = load_u32(qh_bytes);
  for (int j = 0; j < kQK / 2; ++j) {
    q[j] = int8_t((qs[j] & 15) | ((qh >> j) & 1) << 4);
    q[j + 16] = int8_t((qs[j] >> 4) | ((qh >> (j + 16)) & 1) << 4);
  }
}

void decode(const BlockQ5_0& b, LegacyInts& out) {
  decode_q5(b.qh, b.qs, out.q);
  for (int8_t& q : out.q) q = int8_t(q - 16);
  out.d = fp16_to_fp32(b.d);
  out.m = 0;
}

void decode(const BlockQ5_1& b, LegacyInts& out) {
  decode_q5(b.qh, b.qs, out.q);
  out.d = fp16_to_fp32(b.d);
  out.m = fp16_to_fp32(b.m);
}

void decode(const BlockQ8_0& b, LegacyInts& out) {
  std::memcpy(out.q, b.qs, kQK);
  out.d = fp16_to_fp32(b.d);
  out.m = 0;
}

// Non-linear 4-bit types: the levels themselves are the integers (ggml's vec_dot_iq4_nl_q8_0
// and vec_dot_mxfp4_q8_0 sum levels x activations per block, then scale).
void decode(const BlockIQ4_NL& b, LegacyInts& out) {
  for (int j = 0; j < kQK / 2; ++j) {
    out.q[j] = kValuesIq4nl[b.qs[j] & 15];
    out.q[j + 16] = kValuesIq4nl[b.qs[j] >> 4];
  }
  out.d = fp16_to_fp32(b.d);
  out.m = 0;
}

void decode(const BlockMXFP4& b, LegacyInts& out) {
  for (int j = 0; j < kQK / 2; ++j) {
    out.q[j] = kValuesMxfp4[b.qs[j] & 15];
    out.q[j + 16] = kValuesMxfp4[b.qs[j] >> 4];
  }
  out.d = mxfp4_scale(b.e);
  out.m = 0;
}

int32_t dot32(const int8_t* a, const int8_t* b) {
  int32_t sum = 0;
  for (int i = 0; i < kQK; ++i) sum += int32_t(a[i]) * int32_t(b[i]);
  return sum;
}

float dot(const LegacyInts* w, const BlockQ8_0* x, int64_t n_blocks) {
  float sum = 0;
  for (int64_t b = 0; b < n_blocks; ++b) {
    sum += float(dot32(w[b].q, x[b].qs)) * (w[b].d * fp16_to_fp32(x[b].d));
  }
  return sum;
}

float dot(const LegacyInts* w, const BlockQ8_1* x, int64_t n_blocks) {
  float sum = 0;
  for (int64_t b = 0; b < n_blocks; ++b) {
    sum += float(dot32(w[b].q, x[b].qs)) * (w[b].d * fp16_to_fp32(x[b].d)) +
           w[b].m * fp16_to_fp32(x[b].s);
  }
  return sum;
}

// ---- K-quant 256-element super-blocks ----------------------------------------------------

// A super-block decoded: x[i] = d * scale[i / 16] * q[i] - dmin * min[i / 16].
struct KInts {
  int8_t q[kQK_K];
  int16_t scale[16];
  int16_t min[16];
  float d;
  float dmin;
};

void decode(const BlockQ2_K& b, KInts& out) {
  for (int h = 0; h < 2; ++h) {
    for (int j = 0; j < 4; ++j) {
      for (int l = 0; l < 32; ++l) {
        out.q[128 * h + 32 * j + l] = int8_t((b.qs[32 * h + l] >> (2 * j)) & 3);
      }
    }
  }
  for (int s = 0; s < 16; ++s) {
    out.scale[s] = int16_t(b.scales[s] & 15);
    out.min[s] = int16_t(b.scales[s] >> 4);
  }
  out.d = fp16_to_fp32(b.d);
  out.dmin = fp16_to_fp32(b.dmin);
}

void decode(const BlockQ3_K& b, KInts& out) {
  for (int h = 0; h < 2; ++h) {
    for (int j = 0; j < 4; ++j) {
      for (int l = 0; l < 32; ++l) {
        const int i = 128 * h + 32 * j + l;
        const int low = (b.qs[32 * h + l] >> (2 * j)) & 3;
        const int high = (b.hmask[i % 32] >> (i / 32)) & 1;
        out.q[i] = int8_t(low + 4 * high - 4);
      }
    }
  }
  for (int s = 0; s < 16; ++s) {
    out.scale[s] = int16_t(get_scale_k3(s, b.scales));
    out.min[s] = 0;
  }
  out.d = fp16_to_fp32(b.d);
  out.dmin = 0;
}

// The 4-bit part and the 6-bit scales shared by q4_K and q5_K.
void decode_q4_k_part(const uint8_t* scales, const uint8_t* qs, KInts& out) {
  for (int p = 0; p < 4; ++p) {
    for (int l = 0; l < 32; ++l) {
      out.q[64 * p + l] = int8_t(qs[32 * p + l] & 15);
      out.q[64 * p + l + 32] = int8_t(qs[32 * p + l] >> 4);
    }
  }
  for (int s = 0; s < 8; ++s) {
    uint8_t sc = 0, mn = 0;
    get_scale_min_k4(s, scales, &sc, &mn);
    out.scale[2 * s] = out.scale[2 * s + 1] = sc;
    out.min[2 * s] = out.min[2 * s + 1] = mn;
  }
}

void decode(const BlockQ4_K& b, KInts& out) {
  decode_q4_k_part(b.scales, b.qs, out);
  out.d = fp16_to_fp32(b.d);
  out.dmin = fp16_to_fp32(b.dmin);
}

void decode(const BlockQ5_K& b, KInts& out) {
  decode_q4_k_part(b.scales, b.qs, out);
  for (int i = 0; i < kQK_K; ++i)
    out.q[i] = int8_t(out.q[i] | ((b.qh[i % 32] >> (i / 32)) & 1) << 4);
  out.d = fp16_to_fp32(b.d);
  out.dmin = fp16_to_fp32(b.dmin);
}

void decode(const BlockQ6_K& b, KInts& out) {
  for (int h = 0; h < 2; ++h) {
    const uint8_t* ql = b.ql + 64 * h;
    const uint8_t* qh = b.qh + 32 * h;
    int8_t* q = out.q + 128 * h;
    for (int l = 0; l < 32; ++l) {
      q[l] = int8_t(((ql[l] & 15) | ((qh[l] >> 0) & 3) << 4) - 32);
      q[l + 32] = int8_t(((ql[l + 32] & 15) | ((qh[l] >> 2) & 3) << 4) - 32);
      q[l + 64] = int8_t(((ql[l] >> 4) | ((qh[l] >> 4) & 3) << 4) - 32);
      q[l + 96] = int8_t(((ql[l + 32] >> 4) | ((qh[l] >> 6) & 3) << 4) - 32);
    }
  }
  for (int s = 0; s < 16; ++s) {
    out.scale[s] = b.scales[s];
    out.min[s] = 0;
  }
  out.d = fp16_to_fp32(b.d);
  out.dmin = 0;
}

// iq4_xs: one scale per 32 values, so both 16-value halves of a sub-block share it.
void decode(const BlockIQ4_XS& b, KInts& out) {
  for (int s = 0; s < 8; ++s) {
    for (int j = 0; j < 16; ++j) {
      out.q[32 * s + j] = kValuesIq4nl[b.qs[16 * s + j] & 15];
      out.q[32 * s + j + 16] = kValuesIq4nl[b.qs[16 * s + j] >> 4];
    }
    out.scale[2 * s] = out.scale[2 * s + 1] = int16_t(iq4_xs_scale(b, s));
    out.min[2 * s] = out.min[2 * s + 1] = 0;
  }
  out.d = fp16_to_fp32(b.d);
  out.dmin = 0;
}

float dot(const KInts* w, const BlockQ8_K* x, int64_t n_blocks) {
  float sum = 0;
  for (int64_t b = 0; b < n_blocks; ++b) {
    int32_t isum = 0, msum = 0;
    for (int s = 0; s < 16; ++s) {
      int32_t sub = 0;
      for (int l = 0; l < 16; ++l) sub += int32_t(w[b].q[16 * s + l]) * x[b].qs[16 * s + l];
      isum += w[b].scale[s] * sub;
      msum += w[b].min[s] * x[b].bsums[s];
    }
    sum += x[b].d * w[b].d * float(isum) - x[b].d * w[b].dmin * float(msum);
  }
  return sum;
}

// ---- float types ---------------------------------------------------------------------------

void decode_row(const float* w, float* out, int64_t cols) {
  std::memcpy(out, w, size_t(cols) * sizeof(float));
}
void decode_row(const uint16_t* w, float* out, int64_t cols, bool bf16) {
  for (int64_t c = 0; c < cols; ++c) out[c] = bf16 ? bf16_to_fp32(w[c]) : fp16_to_fp32(w[c]);
}

float dot(const float* w, const float* x, int64_t cols) {
  double sum = 0;
  for (int64_t c = 0; c < cols; ++c) sum += double(w[c]) * double(x[c]);
  return float(sum);
}

// ---- the gemm, once for every type -----------------------------------------------------

// Block: the GGUF block; Decoded: what it decodes to; Act: the activation block.
template <typename Block, typename Decoded, typename Act>
struct BlockGemm {
  static constexpr int64_t kBlockSize = sizeof(Decoded::q);
  static size_t scratch_bytes(int64_t cols) { return size_t(cols / kBlockSize) * sizeof(Decoded); }
  static void gemm(const GemmArgs& a) {
    const int64_t n_blocks = a.cols / kBlockSize;
    const size_t row_stride = size_t(n_blocks) * sizeof(Block);
    Decoded* row = reinterpret_cast<Decoded*>(a.scratch);  // [n_blocks]
    for (int64_t r = a.row_begin; r < a.row_end; ++r) {
      const Block* blocks = reinterpret_cast<const Block*>(a.weights + size_t(r) * row_stride);
      for (int64_t b = 0; b < n_blocks; ++b) decode(blocks[b], row[b]);
      for (int64_t t = 0; t < a.n_tokens; ++t) {
        const Act* x =
            reinterpret_cast<const Act*>(a.activations + size_t(t) * a.activation_stride);
        a.y[t * a.y_stride + r] = dot(row, x, n_blocks);
      }
    }
  }
};

// Element: float or uint16_t (f16 / bf16 bits).
template <typename Element, bool kBF16 = false>
struct FloatGemm {
  static size_t scratch_bytes(int64_t cols) { return size_t(cols) * sizeof(float); }
  static void gemm(const GemmArgs& a) {
    float* row = reinterpret_cast<float*>(a.scratch);  // [cols]
    for (int64_t r = a.row_begin; r < a.row_end; ++r) {
      const Element* w = reinterpret_cast<const Element*>(a.weights) + r * a.cols;
      if constexpr (sizeof(Element) == 4) {
        decode_row(w, row, a.cols);
      } else {
        decode_row(w, row, a.cols, kBF16);
      }
      for (int64_t t = 0; t < a.n_tokens; ++t) {
        const float* x =
            reinterpret_cast<const float*>(a.activations + size_t(t) * a.activation_stride);
        a.y[t * a.y_stride + r] = dot(row, x, a.cols);
      }
    }
  }
};

template <TensorType kType, typename Gemm, typename Act>
constexpr MatmulKernel entry() {
  return MatmulKernel{kType,           Isa::kScalar,         1,
                      &Act::row_bytes, &Act::quantize,       nullptr,
                      nullptr,         &Gemm::scratch_bytes, &Gemm::gemm};
}

constexpr MatmulKernel kKernels[] = {
    entry<TensorType::F32, FloatGemm<float>, ActivationsF32>(),
    entry<TensorType::F16, FloatGemm<uint16_t>, ActivationsF32>(),
    entry<TensorType::BF16, FloatGemm<uint16_t, true>, ActivationsBF16>(),
    entry<TensorType::Q4_0, BlockGemm<BlockQ4_0, LegacyInts, BlockQ8_0>, ActivationsQ8_0>(),
    entry<TensorType::Q4_1, BlockGemm<BlockQ4_1, LegacyInts, BlockQ8_1>, ActivationsQ8_1>(),
    entry<TensorType::Q5_0, BlockGemm<BlockQ5_0, LegacyInts, BlockQ8_0>, ActivationsQ8_0>(),
    entry<TensorType::Q5_1, BlockGemm<BlockQ5_1, LegacyInts, BlockQ8_1>, ActivationsQ8_1>(),
    entry<TensorType::Q8_0, BlockGemm<BlockQ8_0, LegacyInts, BlockQ8_0>, ActivationsQ8_0>(),
    entry<TensorType::Q2_K, BlockGemm<BlockQ2_K, KInts, BlockQ8_K>, ActivationsQ8_K>(),
    entry<TensorType::Q3_K, BlockGemm<BlockQ3_K, KInts, BlockQ8_K>, ActivationsQ8_K>(),
    entry<TensorType::Q4_K, BlockGemm<BlockQ4_K, KInts, BlockQ8_K>, ActivationsQ8_K>(),
    entry<TensorType::Q5_K, BlockGemm<BlockQ5_K, KInts, BlockQ8_K>, ActivationsQ8_K>(),
    entry<TensorType::Q6_K, BlockGemm<BlockQ6_K, KInts, BlockQ8_K>, ActivationsQ8_K>(),
    {TensorType::IQ2_XXS, Isa::kScalar, 1, act_k_row_bytes, quantize_act_k, nullptr, nullptr,
     iq_grid::scalar::scratch_bytes, iq_grid::scalar::gemm_iq2_xxs},
    {TensorType::IQ2_XS, Isa::kScalar, 1, act_k_row_bytes, quantize_act_k, nullptr, nullptr,
     iq_grid::scalar::scratch_bytes, iq_grid::scalar::gemm_iq2_xs},
    {TensorType::IQ2_S, Isa::kScalar, 1, act_k_row_bytes, quantize_act_k, nullptr, nullptr,
     iq_grid::scalar::scratch_bytes, iq_grid::scalar::gemm_iq2_s},
    {TensorType::IQ3_XXS, Isa::kScalar, 1, act_k_row_bytes, quantize_act_k, nullptr, nullptr,
     iq_grid::scalar::scratch_bytes, iq_grid::scalar::gemm_iq3_xxs},
    {TensorType::IQ3_S, Isa::kScalar, 1, act_k_row_bytes, quantize_act_k, nullptr, nullptr,
     iq_grid::scalar::scratch_bytes, iq_grid::scalar::gemm_iq3_s},
    {TensorType::IQ1_S, Isa::kScalar, 1, act_k_row_bytes, quantize_act_k, nullptr, nullptr,
     iq_grid::scalar::scratch_bytes, iq_grid::scalar::gemm_iq1_s},
    {TensorType::IQ1_M, Isa::kScalar, 1, act_k_row_bytes, quantize_act_k, nullptr, nullptr,
     iq_grid::scalar::scratch_bytes, iq_grid::scalar::gemm_iq1_m},
    entry<TensorType::IQ4_NL, BlockGemm<BlockIQ4_NL, LegacyInts, BlockQ8_0>, ActivationsQ8_0>(),
    entry<TensorType::IQ4_XS, BlockGemm<BlockIQ4_XS, KInts, BlockQ8_K>, ActivationsQ8_K>(),
    entry<TensorType::MXFP4, BlockGemm<BlockMXFP4, LegacyInts, BlockQ8_0>, ActivationsQ8_0>(),
};

}  // namespace

std::span<const MatmulKernel> matmul_kernels() {
  return kKernels;
}

}  // namespace herd::kernels::scalar

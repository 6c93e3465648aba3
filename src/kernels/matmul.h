// Matrix products of weights (any tensor type of the quant table) with float activations:
// the kernels' public face. The engine calls only this; what happens inside (activation
// quantization to Q8 blocks, repacked weight layouts, AVX2 / AVX-512 VNNI / NEON code)
// is chosen once at start-up from the CPU's features.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>
#include <string_view>
#include <vector>

#include "quant/types.h"
#include "util/thread_pool.h"

namespace herd::kernels {

// Instruction sets a kernel table can be built for. kScalar is the reference everything
// else is tested against.
enum class Isa { kScalar, kAvx2, kAvx512, kNeon };
std::string_view isa_name(Isa isa);

struct CpuFeatures {
  bool avx2 = false, fma = false, f16c = false;
  bool avx512f = false, avx512bw = false, avx512vl = false, avx512vnni = false, avx512bf16 = false;
  bool neon = false, dotprod = false;
  bool i8mm = false, bf16 = false;  // arm64: detected; no kernel uses them yet
};
// What this CPU and OS support: cpuid + xgetbv on x86; on arm64 the HWCAP bits (Linux) or
// sysctl's hw.optional.arm.FEAT_* flags (macOS).
CpuFeatures detect_cpu();
// The best ISA for these features; `limit` caps it (tests, --isa flags).
Isa best_isa(const CpuFeatures& cpu, Isa limit = Isa::kAvx512);

// A view of a weight matrix as stored in GGUF: `rows` output features, each a row of
// `cols` input features in `type` (row r starts at data + r * row_bytes(type, cols)).
struct MatrixView {
  TensorType type = TensorType::F32;
  int64_t rows = 0;
  int64_t cols = 0;
  const uint8_t* data = nullptr;
};

// A weight matrix in the layout the chosen kernels want (possibly a repacked copy, possibly
// the mapped bytes themselves). Move-only: a repacked copy can be large.
class PackedMatrix {
 public:
  PackedMatrix();
  ~PackedMatrix();
  PackedMatrix(PackedMatrix&&) noexcept;
  PackedMatrix& operator=(PackedMatrix&&) noexcept;
  PackedMatrix(const PackedMatrix&) = delete;
  PackedMatrix& operator=(const PackedMatrix&) = delete;

  TensorType type() const;
  int64_t rows() const;
  int64_t cols() const;
  size_t owned_bytes() const;  // bytes of the repacked copy (0 when it is a view)
  // The rows in GGUF's layout, where the kernels read them as stored (not repacked); null
  // data otherwise. A device backend uploads these bytes.
  MatrixView gguf_view() const;

  struct Impl;
  const Impl& impl() const { return *impl_; }

 private:
  friend PackedMatrix pack_matrix(const MatrixView& w, Isa isa);
  std::unique_ptr<Impl> impl_;
};

// Prepares w for the kernels of `isa`. The returned matrix may point into w.data, which
// must outlive it. Throws herd::Error("[kernels] ...") when the type has no kernel.
PackedMatrix pack_matrix(const MatrixView& w, Isa isa);

// Reusable scratch memory (quantized activations, tiles) so that no call allocates on the
// decode path once the workspace has grown to its working size.
class Workspace {
 public:
  uint8_t* get(size_t bytes);  // valid until the next get()

 private:
  std::vector<uint8_t> buffer_;
};

// y[t][r] = sum_c W[r][c] * x[t][c] for t < n_tokens, r < rows.
// x: [n_tokens][cols] row-major floats; y: [n_tokens][rows] row-major floats.
// Activations are rounded the way the weight type's kernels need (Q8_0 / Q8_1 / Q8_K
// blocks for quantized weights, F16 / BF16 for half-precision weights), as ggml does.
void matmul(const PackedMatrix& w, const float* x, int64_t n_tokens, float* y, ThreadPool& pool,
            Workspace& workspace);

// Several products in one pass over the pool (attn_q, attn_k, attn_v of the same activations;
// MLA's per-head products of different ones): each distinct x is quantized once per
// activation format the kernels need, and one barrier ends them all, which matters in
// decode, where a product takes microseconds.
// jobs[i].y = jobs[i].w * (jobs[i].x or x), each [n_tokens][jobs[i].w->rows()].
// REQUIRES: every w has the same cols; at most kMaxBatch jobs; no y overlaps another.
struct MatmulJob {
  const PackedMatrix* w = nullptr;
  float* y = nullptr;
  const float* x = nullptr;  // [n_tokens][cols] of this job; null: matmul_batch's x
};
inline constexpr size_t kMaxBatch = 16;
void matmul_batch(std::span<const MatmulJob> jobs, const float* x, int64_t n_tokens,
                  ThreadPool& pool, Workspace& workspace);

}  // namespace herd::kernels

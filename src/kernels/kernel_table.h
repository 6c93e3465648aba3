// The kernel table: one MatmulKernel per (weight type, ISA) that has code. matmul.cpp
// picks an entry once per weight matrix (at pack time) and then only calls through its
// function pointers; nothing else branches on the type or the ISA.
// Internal to the kernels module.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>

#include "kernels/matmul.h"

namespace herd::kernels {

// One call of a kernel: every token of `activations` against the weight rows
// [row_begin, row_end).
struct GemmArgs {
  const uint8_t* weights = nullptr;  // packed by the entry's pack(), or the GGUF rows
  int64_t rows = 0;                  // of the whole matrix
  int64_t cols = 0;
  int64_t row_begin = 0;                 // REQUIRES: a multiple of the entry's row_align
  int64_t row_end = 0;                   // REQUIRES: <= rows
  const uint8_t* activations = nullptr;  // [n_tokens][activation_stride bytes]
  size_t activation_stride = 0;
  int64_t n_tokens = 0;
  float* y = nullptr;  // y[t * y_stride + r]
  int64_t y_stride = 0;
  uint8_t* scratch = nullptr;  // scratch_bytes(cols) bytes owned by this call, 64-aligned
};

struct MatmulKernel {
  TensorType type;
  Isa isa;
  // Threads split the rows at multiples of this (the rows of one packed panel).
  int64_t row_align;
  // The activations of one token as the kernel reads them (Q8 blocks, halves, floats).
  size_t (*activation_row_bytes)(int64_t cols);
  void (*quantize_activations)(const float* x, int64_t cols, uint8_t* dst);
  // Repacking at load time. packed_bytes == nullptr: the kernel reads the GGUF rows as
  // they are and pack is unused.
  size_t (*packed_bytes)(int64_t rows, int64_t cols);
  void (*pack)(const MatrixView& w, uint8_t* dst);
  // Per-thread scratch the gemm needs (nullptr: none).
  size_t (*scratch_bytes)(int64_t cols);
  void (*gemm)(const GemmArgs& args);
};

// The entries of each ISA's file. An ISA lists only the types it accelerates; the rest
// fall back to the next ISA down (AVX-512 -> AVX2 -> scalar, NEON -> scalar).
namespace scalar {
std::span<const MatmulKernel> matmul_kernels();
}

// The ISAs compiled into this binary, best first, ending with kScalar (one file per
// target architecture provides it).
std::span<const Isa> compiled_isas();
// The entries of one compiled ISA (empty for an ISA this binary lacks).
std::span<const MatmulKernel> isa_kernels(Isa isa);

// The entry for `type` on `isa` or the best ISA below it; nullptr when no ISA has one.
const MatmulKernel* find_matmul_kernel(TensorType type, Isa isa);

}  // namespace herd::kernels

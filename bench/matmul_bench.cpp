// matmul throughput per weight type, shape, token count and thread count, plus a plain
// memory-read probe to compare decode against.
//   decode  (n_tokens 1): memory-bound; the "GB/s" counter is weight bytes read per second.
//     The matrix is cycled through enough copies (>= 256 MiB) that it cannot stay in the
//     last-level cache, as in a real model, whose layers together far exceed it.
//   batched decode (n_tokens 2..16: that many sequences, one token each): weights cycled
//     from memory as in decode; compare the time per call with the 1-token one.
//   prefill (n_tokens 64, 256): compute-bound; "GFLOP/s" counts 2 * rows * cols * tokens.
// HERD_ISA=scalar|avx2|avx512|neon caps the ISA (default: the best this CPU has).
#include <benchmark/benchmark.h>

#include <cstdlib>
#include <cstring>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "kernels/matmul.h"
#include "quant/types.h"
#include "util/thread_pool.h"

namespace {

using herd::TensorType;
using herd::ThreadPool;
using namespace herd::kernels;

constexpr size_t kRotationBytes = size_t(256) << 20;
// Token counts up to this are "decode": batched decode of that many sequences.
constexpr int64_t kMaxDecodeTokens = 16;

Isa bench_isa() {
  const char* env = std::getenv("HERD_ISA");
  Isa limit = Isa::kAvx512;
  if (env != nullptr) {
    for (Isa isa : {Isa::kScalar, Isa::kAvx2, Isa::kAvx512, Isa::kNeon}) {
      if (isa_name(isa) == env) limit = isa;
    }
    if (limit == Isa::kNeon) return best_isa(detect_cpu());
  }
  return best_isa(detect_cpu(), limit);
}

// Blocks of a type herd cannot write (the grid types): random bytes with a finite f16
// scale of 1/256 (IQ1_M keeps it in the top nibbles of its 4 scale words).
void random_blocks(TensorType type, std::mt19937& rng, uint8_t* dst, int64_t n_blocks) {
  const size_t block_bytes = herd::type_traits(type).block_bytes;
  const uint16_t d = 0x1c00;  // f16 1/256
  for (int64_t b = 0; b < n_blocks; ++b) {
    uint8_t* block = dst + size_t(b) * block_bytes;
    for (size_t i = 0; i < block_bytes; ++i) block[i] = uint8_t(rng());
    if (type == TensorType::IQ1_M) {
      for (int m = 0; m < 4; ++m)
        block[49 + 2 * m] = uint8_t((block[49 + 2 * m] & 0x0f) | ((d >> (4 * m)) & 15) << 4);
    } else {
      std::memcpy(block, &d, 2);
    }
  }
}

// GGUF bytes of a rows x cols matrix: 64 distinct quantized random rows, repeated (the
// reference quantizers are slow, and repeated rows read the same as distinct ones).
std::vector<uint8_t> make_weights(TensorType type, int64_t rows, int64_t cols) {
  const herd::TypeTraits& traits = herd::type_traits(type);
  const size_t row_size = herd::row_bytes(type, cols);
  const int64_t distinct = rows < 64 ? rows : 64;
  std::mt19937 rng(7);
  std::normal_distribution<float> normal(0.0f, 0.02f);
  std::vector<float> row(static_cast<size_t>(cols));
  std::vector<uint8_t> bytes(row_size * size_t(rows));
  for (int64_t r = 0; r < distinct; ++r) {
    if (traits.quantize == nullptr) {
      random_blocks(type, rng, bytes.data() + size_t(r) * row_size, cols / traits.block_size);
      continue;
    }
    for (float& v : row) v = normal(rng);
    traits.quantize(row.data(), bytes.data() + size_t(r) * row_size, cols);
  }
  for (int64_t r = distinct; r < rows; ++r) {
    std::memcpy(bytes.data() + size_t(r) * row_size, bytes.data() + size_t(r % distinct) * row_size,
                row_size);
  }
  return bytes;
}

void bm_matmul(benchmark::State& state, TensorType type, int64_t rows, int64_t cols) {
  const int64_t n_tokens = state.range(0);
  const int threads = int(state.range(1));
  const Isa isa = bench_isa();
  const std::vector<uint8_t> gguf = make_weights(type, rows, cols);
  const size_t matrix_bytes = gguf.size();
  // Decode (one token, or a few sequences decoding together) cycles through copies so that
  // weights come from memory, not cache.
  const size_t copies =
      n_tokens <= kMaxDecodeTokens ? (kRotationBytes + matrix_bytes - 1) / matrix_bytes : 1;
  // A packed matrix may be a view of its source (f16, f32): then the sources rotate too.
  const bool is_view = pack_matrix({type, rows, cols, gguf.data()}, isa).owned_bytes() == 0;
  const std::vector<std::vector<uint8_t>> sources(is_view ? copies : 1, gguf);
  std::vector<PackedMatrix> packed;
  for (size_t i = 0; i < copies; ++i) {
    packed.push_back(pack_matrix({type, rows, cols, sources[is_view ? i : 0].data()}, isa));
  }
  std::vector<float> x(static_cast<size_t>(n_tokens * cols));
  std::vector<float> y(static_cast<size_t>(n_tokens * rows));
  std::mt19937 rng(3);
  std::uniform_real_distribution<float> uniform(-1.0f, 1.0f);
  for (float& v : x) v = uniform(rng);
  ThreadPool pool(threads);
  Workspace workspace;
  size_t next = 0;
  for (auto _ : state) {
    matmul(packed[next], x.data(), n_tokens, y.data(), pool, workspace);
    next = next + 1 == copies ? 0 : next + 1;
    benchmark::DoNotOptimize(y.data());
  }
  const double iterations = double(state.iterations());
  state.counters["GB/s"] =
      benchmark::Counter(double(matrix_bytes) * iterations / 1e9, benchmark::Counter::kIsRate);
  state.counters["GFLOP/s"] =
      benchmark::Counter(2.0 * double(rows) * double(cols) * double(n_tokens) * iterations / 1e9,
                         benchmark::Counter::kIsRate);
  state.SetLabel(std::string(isa_name(isa)));
}

// One token against a matrix that stays in cache (256 x 7168, 0.5-0.9 MiB for the grid
// types): the kernel's own cost, without memory. For types whose decoding is the limit (the
// grid types) this says how many cores it takes to stream them at memory bandwidth.
void bm_matmul_cached(benchmark::State& state, TensorType type) {
  constexpr int64_t kRows = 256, kCols = 7168;
  const Isa isa = bench_isa();
  const std::vector<uint8_t> gguf = make_weights(type, kRows, kCols);
  const PackedMatrix packed = pack_matrix({type, kRows, kCols, gguf.data()}, isa);
  std::vector<float> x(kCols), y(kRows);
  std::mt19937 rng(3);
  std::uniform_real_distribution<float> uniform(-1.0f, 1.0f);
  for (float& v : x) v = uniform(rng);
  ThreadPool pool(1);
  Workspace workspace;
  for (auto _ : state) {
    matmul(packed, x.data(), 1, y.data(), pool, workspace);
    benchmark::DoNotOptimize(y.data());
  }
  state.counters["GB/s"] = benchmark::Counter(
      double(gguf.size()) * double(state.iterations()) / 1e9, benchmark::Counter::kIsRate);
  state.SetLabel(std::string(isa_name(isa)));
}

// Sum of buffer[begin, end): a plain reduction the compiler vectorizes; the AVX2 copy
// issues 32-byte loads, which a single core needs to reach the memory's bandwidth.
uint64_t sum_range(const uint64_t* buffer, int64_t begin, int64_t end) {
  uint64_t sum = 0;
  for (int64_t i = begin; i < end; ++i) sum += buffer[i];
  return sum;
}
#if defined(__x86_64__)
__attribute__((target("avx2"))) uint64_t sum_range_avx2(const uint64_t* buffer, int64_t begin,
                                                        int64_t end) {
  uint64_t sum = 0;
  for (int64_t i = begin; i < end; ++i) sum += buffer[i];
  return sum;
}
bool has_avx2() {
  return __builtin_cpu_supports("avx2");
}
#else
uint64_t sum_range_avx2(const uint64_t* buffer, int64_t begin, int64_t end) {
  return sum_range(buffer, begin, end);
}
bool has_avx2() {
  return false;
}
#endif

// Reads a 1 GiB buffer (split across the pool's threads): the bandwidth decode aims at.
void bm_memory_read(benchmark::State& state) {
  const int threads = int(state.range(0));
  constexpr size_t kBytes = size_t(1) << 30;
  std::vector<uint64_t> buffer(kBytes / sizeof(uint64_t));
  for (size_t i = 0; i < buffer.size(); ++i) buffer[i] = i;
  ThreadPool pool(threads);
  const bool avx2 = has_avx2();
  std::vector<uint64_t> sums(static_cast<size_t>(threads) * 8);
  for (auto _ : state) {
    pool.parallel_for(int64_t(buffer.size()), [&](int64_t begin, int64_t end, int thread) {
      const uint64_t sum =
          avx2 ? sum_range_avx2(buffer.data(), begin, end) : sum_range(buffer.data(), begin, end);
      sums[size_t(thread) * 8] = sum;  // one cache line per thread
    });
    benchmark::DoNotOptimize(sums.data());
  }
  state.counters["GB/s"] = benchmark::Counter(double(kBytes) * double(state.iterations()) / 1e9,
                                              benchmark::Counter::kIsRate);
}

void register_all() {
  struct Shape {
    int64_t rows, cols;
  };
  // A 1.1B llama: attn_q/attn_output 2048x2048, ffn_gate/ffn_up 8192x2048, ffn_down 2048x8192.
  const Shape shapes[] = {{2048, 2048}, {8192, 2048}, {2048, 8192}};
  for (TensorType type :
       {TensorType::Q4_0, TensorType::Q8_0, TensorType::Q4_K, TensorType::Q6_K, TensorType::F16,
        TensorType::IQ4_NL, TensorType::IQ4_XS, TensorType::MXFP4}) {
    for (const Shape& s : shapes) {
      const std::string name = "matmul/" + std::string(herd::type_traits(type).name) + "/" +
                               std::to_string(s.rows) + "x" + std::to_string(s.cols);
      benchmark::RegisterBenchmark(name.c_str(), bm_matmul, type, s.rows, s.cols)
          ->ArgNames({"tokens", "threads"})
          ->ArgsProduct({{1, 2, 4, 8, 16, 64, 256}, {1, 2}})
          ->UseRealTime()
          ->Unit(benchmark::kMicrosecond);
    }
  }
  // The experts of Qwen3.5/3.6-35B-A3B (hidden 2048, expert FFN 512): gate/up 512x2048,
  // down 2048x512, in the types of its Q4_K_M files; decode and batched decode.
  for (TensorType type : {TensorType::Q4_K, TensorType::Q6_K}) {
    for (const Shape& s : {Shape{512, 2048}, Shape{2048, 512}}) {
      const std::string name = "matmul/" + std::string(herd::type_traits(type).name) + "/" +
                               std::to_string(s.rows) + "x" + std::to_string(s.cols);
      benchmark::RegisterBenchmark(name.c_str(), bm_matmul, type, s.rows, s.cols)
          ->ArgNames({"tokens", "threads"})
          ->ArgsProduct({{1, 8}, {1, 2}})
          ->UseRealTime()
          ->Unit(benchmark::kMicrosecond);
    }
  }
  // The grid types of 1T-parameter MoE files (DeepSeek V3, Kimi K2: hidden 7168, expert
  // FFN 2048): decode, batched decode and prefill.
  for (TensorType type :
       {TensorType::IQ2_XXS, TensorType::IQ2_XS, TensorType::IQ2_S, TensorType::IQ3_XXS,
        TensorType::IQ3_S, TensorType::IQ1_S, TensorType::IQ1_M}) {
    const std::string name = "matmul/" + std::string(herd::type_traits(type).name) + "/2048x7168";
    benchmark::RegisterBenchmark(name.c_str(), bm_matmul, type, 2048, 7168)
        ->ArgNames({"tokens", "threads"})
        ->ArgsProduct({{1, 8, 64}, {1, 2}})
        ->UseRealTime()
        ->Unit(benchmark::kMicrosecond);
  }
  for (TensorType type : {TensorType::Q4_K, TensorType::Q6_K, TensorType::IQ2_XXS,
                          TensorType::IQ2_XS, TensorType::IQ2_S, TensorType::IQ3_XXS,
                          TensorType::IQ3_S, TensorType::IQ1_S, TensorType::IQ1_M}) {
    const std::string name =
        "matmul_cached/" + std::string(herd::type_traits(type).name) + "/256x7168/tokens:1";
    benchmark::RegisterBenchmark(name.c_str(), bm_matmul_cached, type)
        ->Unit(benchmark::kMicrosecond);
  }
  benchmark::RegisterBenchmark("memory_read/1GiB", bm_memory_read)
      ->ArgNames({"threads"})
      ->Arg(1)
      ->Arg(2)
      ->UseRealTime()
      ->Unit(benchmark::kMillisecond);
}

}  // namespace

int main(int argc, char** argv) {
  register_all();
  benchmark::Initialize(&argc, argv);
  if (benchmark::ReportUnrecognizedArguments(argc, argv)) return 1;
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  return 0;
}

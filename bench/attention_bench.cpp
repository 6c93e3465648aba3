// Attention kernel throughput over a cached context, per call as the engine makes them
// (one call per run of heads that share a KV head, each thread its own runs).
//   mla: DeepSeek V3's latent attention (576-value rows: 512 latent + 64 rope key; values
//        the first 512) of 16 heads, one call as the engine makes it (decode cuts the
//        positions over the threads: each thread's call covers n_pos / threads of them);
//        mla_wide: the same through attend_wide (arm64's kernel, x86's before attend_lanes).
//   gqa: a llama-style KV head of 128 values shared by 4 query heads.
// The context is cycled through 12 layers' caches, as decode reads them, so that one
// layer's cache does not stay in L2 from the call before. "GFLOP/s" counts
// 2 * n_q * n_pos * (k_dim + v_dim).
// HERD_ISA=scalar|avx2|avx512 caps the ISA (default: the best this CPU has).
#include <benchmark/benchmark.h>

#include <cstdlib>
#include <random>
#include <string>
#include <vector>

#include "kernels/attention.h"
#include "quant/float16.h"

namespace {

using namespace herd::kernels;

constexpr int64_t kLayers = 12;

Isa bench_isa() {
  const char* env = std::getenv("HERD_ISA");
  Isa limit = Isa::kAvx512;
  if (env != nullptr) {
    for (Isa isa : {Isa::kScalar, Isa::kAvx2, Isa::kAvx512}) {
      if (isa_name(isa) == env) limit = isa;
    }
  }
  return best_isa(detect_cpu(), limit);
}

void bm_attend(benchmark::State& state, int64_t n_q, int64_t k_dim, int64_t v_dim,
               AttendFn attend = nullptr) {
  const int64_t n_pos = state.range(0);
  if (attend == nullptr) attend = attend_kernel(bench_isa(), k_dim, v_dim);
  std::mt19937 rng(7);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  // [kLayers][n_pos][k_dim] F16 rows; values are the first v_dim of each row (as MLA's).
  std::vector<uint16_t> cache(static_cast<size_t>(kLayers * n_pos * k_dim));
  for (uint16_t& x : cache) x = herd::fp32_to_fp16(normal(rng));
  std::vector<float> q(static_cast<size_t>(n_q * k_dim));
  for (float& x : q) x = normal(rng);
  std::vector<float> scores(static_cast<size_t>(attend_scratch_floats(n_q, n_pos, k_dim, v_dim)));
  std::vector<float> out(static_cast<size_t>(n_q * v_dim));
  int64_t layer = 0;
  for (auto _ : state) {
    AttendArgs a;
    a.q = q.data();
    a.n_q = n_q;
    a.keys = cache.data() + layer * n_pos * k_dim;
    a.values = a.keys;
    a.stride = k_dim;
    a.n_pos = n_pos;
    a.k_dim = k_dim;
    a.v_dim = v_dim;
    a.scale = 0.1f;
    a.scores = scores.data();
    a.out = out.data();
    attend(a);
    benchmark::DoNotOptimize(out.data());
    layer = (layer + 1) % kLayers;
  }
  const double flops = 2.0 * double(n_q * n_pos * (k_dim + v_dim));
  state.counters["GFLOP/s"] =
      benchmark::Counter(flops * double(state.iterations()) / 1e9, benchmark::Counter::kIsRate);
  state.SetLabel(std::string(isa_name(bench_isa())));
}

void bm_mla(benchmark::State& state) {
  bm_attend(state, 16, 576, 512);
}
void bm_mla_wide(benchmark::State& state) {
  bm_attend(state, 16, 576, 512,
            bench_isa() == Isa::kAvx512 ? avx512::attend_wide : avx2::attend_wide);
}
void bm_gqa(benchmark::State& state) {
  bm_attend(state, 4, 128, 128);
}

}  // namespace

BENCHMARK(bm_mla)->Arg(256)->Arg(1024)->Arg(2048)->Arg(8192)->Unit(benchmark::kMicrosecond);
BENCHMARK(bm_mla_wide)->Arg(256)->Arg(1024)->Arg(2048)->Arg(8192)->Unit(benchmark::kMicrosecond);
BENCHMARK(bm_gqa)->Arg(256)->Arg(2048)->Arg(8192)->Unit(benchmark::kMicrosecond);

BENCHMARK_MAIN();

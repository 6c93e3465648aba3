// Gated delta rule throughput for one V head over a prompt, recurrence against the chunked
// form (delta_net.h), for Qwen3.5 / 3.6's head of 128 key and value dims and Qwen3-Next's
// 128 as well (the small test models use 64). "tokens/s" is per head: the forward pass runs
// the heads on the threads. HERD_ISA=scalar|avx2|avx512 caps the ISA.
#include <benchmark/benchmark.h>

#include <cmath>
#include <cstdlib>
#include <random>
#include <vector>

#include "kernels/delta_net.h"

namespace {

using namespace herd::kernels;

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

void bm_delta_rule(benchmark::State& state, bool chunked) {
  const int64_t n = state.range(0), d = state.range(1);
  std::mt19937 rng(1);
  std::uniform_real_distribution<float> dist(-1, 1);
  std::vector<float> q(n * d), k(n * d), v(n * d), beta(n), g(n), s(d * d), out(n * d);
  for (auto* vec : {&q, &k, &v, &s}) {
    for (float& x : *vec) x = dist(rng);
  }
  for (int64_t t = 0; t < n; ++t) {
    l2_normalize(q.data() + t * d, d, 1e-6f);
    l2_normalize(k.data() + t * d, d, 1e-6f);
    beta[t] = 0.5f + 0.4f * dist(rng);
    g[t] = -0.5f + 0.4f * dist(rng);
  }
  std::vector<float> scratch(delta_rule_scratch_floats(d, d));
  const DeltaRuleFn fn = delta_rule_kernel(bench_isa(), d, chunked);
  for (auto _ : state) {
    fn({n, d, d, q.data(), d, k.data(), d, v.data(), d, beta.data(), g.data(), 1, 0.1f, s.data(),
        out.data(), d, scratch.data()});
    benchmark::DoNotOptimize(out.data());
  }
  state.counters["tokens/s"] =
      benchmark::Counter(double(n) * state.iterations(), benchmark::Counter::kIsRate);
}

void sizes(benchmark::internal::Benchmark* b) {
  for (int64_t d : {64, 128}) {
    for (int64_t n : {1, 64, 512}) b->Args({n, d});
  }
}

BENCHMARK_CAPTURE(bm_delta_rule, recurrent, false)->Apply(sizes);
BENCHMARK_CAPTURE(bm_delta_rule, chunked, true)->Apply(sizes);

}  // namespace

BENCHMARK_MAIN();

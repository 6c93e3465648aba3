// The Vulkan products' time per call on device 0 (HERD_VULKAN_TEST_DEVICE=N for another):
// matvec against matmul (the tiled shader) on the same weights and tokens, so that the
// tokens at which Kernels::matmul stops calling matvec can be measured per device.
// One recording, submitted again each iteration: the time includes the submission and the
// wait, as a forward's would. "GFLOP/s" counts 2 * rows * cols * tokens.
//   ./build/bench/vulkan_bench --benchmark_filter=q4_0
#include <benchmark/benchmark.h>

#include <cstdlib>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "quant/types.h"
#include "util/error.h"
#include "vulkan/context.h"
#include "vulkan/kernels.h"

namespace {

using namespace herd;
using namespace herd::vulkan;

struct Device {
  std::unique_ptr<Context> context;
  std::unique_ptr<Kernels> kernels;
  std::string error;
};

Device& device() {
  static Device d = [] {
    Device d;
    try {
      const char* index = std::getenv("HERD_VULKAN_TEST_DEVICE");
      d.context = Context::create(index != nullptr ? std::atoi(index) : 0);
      // matmul always tiled: the comparison is the point.
      d.kernels = std::make_unique<Kernels>(*d.context, KernelOptions{.matmul_min_tokens = 1});
    } catch (const Error& e) {
      d.error = e.what();
    }
    return d;
  }();
  return d;
}

// Args: type, rows (= cols), tokens, 0 matvec / 1 matmul.
void BM_Product(benchmark::State& state) {
  Device& d = device();
  if (d.context == nullptr) {
    state.SkipWithError(("no Vulkan device: " + d.error).c_str());
    return;
  }
  const auto type = static_cast<TensorType>(state.range(0));
  const int64_t rows = state.range(1), cols = state.range(1), n_tokens = state.range(2);
  const bool tiled = state.range(3) != 0;
  std::mt19937 rng(1);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  std::vector<float> w(size_t(rows * cols)), x(size_t(n_tokens * cols));
  for (float& v : w) v = normal(rng);
  for (float& v : x) v = normal(rng);
  std::vector<uint8_t> packed(row_bytes(type, cols) * size_t(rows));
  type_traits(type).quantize(w.data(), packed.data(), rows * cols);
  Context& context = *d.context;
  Buffer bw(context, packed.size(), BufferKind::kDevice, "weights");
  Buffer bx(context, x.size() * 4, BufferKind::kDevice, "x");
  Buffer by(context, size_t(n_tokens * rows) * 4, BufferKind::kDevice, "y");
  upload(context, bw, packed.data(), packed.size());
  upload(context, bx, x.data(), x.size() * 4);
  Recorder r(context);
  r.begin();
  if (tiled) {
    d.kernels->matmul(r, type, bw, bx, by, rows, cols, n_tokens);
  } else {
    d.kernels->matvec(r, type, bw, bx, by, rows, cols, n_tokens);
  }
  r.submit_and_wait();  // pipelines made, caches warm
  for (auto _ : state) r.submit_and_wait();
  state.counters["GFLOP/s"] = benchmark::Counter(2.0 * double(rows * cols * n_tokens) * 1e-9,
                                                 benchmark::Counter::kIsIterationInvariantRate);
  state.SetLabel(std::string(type_traits(type).name) + (tiled ? " matmul" : " matvec"));
}

void products(benchmark::internal::Benchmark* b) {
  for (const TensorType type : {TensorType::Q4_0, TensorType::Q8_0}) {
    for (const int64_t n_tokens : {1, 4, 8, 12, 16, 32, 64}) {
      for (const int64_t tiled : {0, 1}) b->Args({int64_t(type), 2048, n_tokens, tiled});
    }
  }
}
BENCHMARK(BM_Product)->Apply(products)->Unit(benchmark::kMillisecond)->UseRealTime();

}  // namespace

BENCHMARK_MAIN();

#include "kernels/delta_net.h"

#include <gtest/gtest.h>

#include <cmath>
#include <random>
#include <string>
#include <vector>

namespace herd::kernels {
namespace {

std::vector<float> random_vector(std::mt19937& rng, int64_t n, float lo, float hi) {
  std::uniform_real_distribution<float> dist(lo, hi);
  std::vector<float> v(static_cast<size_t>(n));
  for (float& x : v) x = dist(rng);
  return v;
}

TEST(DeltaNet, ConvCarriesItsStateAcrossCalls) {
  // Direct sum over a zero-padded sequence against runs of 1, 5 and 3 tokens, each call on two
  // ranges of the channels (as threads split them).
  constexpr int64_t kChannels = 12, kKernel = 4, kTokens = 9;
  std::mt19937 rng(3);
  const auto x = random_vector(rng, kTokens * kChannels, -2, 2);
  const auto w = random_vector(rng, kKernel * kChannels, -1, 1);  // [kernel][channels]
  std::vector<float> want(x.size());
  for (int64_t t = 0; t < kTokens; ++t) {
    for (int64_t c = 0; c < kChannels; ++c) {
      float sum = 0;
      for (int64_t j = 0; j < kKernel; ++j) {
        const int64_t src = t - kKernel + 1 + j;
        if (src >= 0) sum += w[j * kChannels + c] * x[src * kChannels + c];
      }
      want[t * kChannels + c] = sum / (1 + std::exp(-sum));
    }
  }
  std::vector<float> state((kKernel - 1) * kChannels, 0.0f), got(x.size());
  int64_t t0 = 0;
  for (int64_t run : {1, 5, 3}) {
    for (auto [c0, c1] : {std::pair<int64_t, int64_t>{0, 5}, {5, kChannels}}) {
      conv1d_silu({run, c1 - c0, kKernel, x.data() + t0 * kChannels + c0, kChannels, w.data() + c0,
                   kChannels, state.data() + c0, kChannels, got.data() + t0 * kChannels + c0,
                   kChannels});
    }
    t0 += run;
  }
  for (size_t i = 0; i < want.size(); ++i) EXPECT_NEAR(got[i], want[i], 1e-5f) << i;
  // The state holds the last kernel - 1 inputs, oldest first.
  for (int64_t r = 0; r < kKernel - 1; ++r) {
    for (int64_t c = 0; c < kChannels; ++c) {
      EXPECT_EQ(state[r * kChannels + c], x[(kTokens - kKernel + 1 + r) * kChannels + c]);
    }
  }
}

TEST(DeltaNet, L2NormalizeKeepsTinyVectors) {
  float x[2] = {3, 4};
  l2_normalize(x, 2, 1e-6f);
  EXPECT_FLOAT_EQ(x[0], 0.6f);
  EXPECT_FLOAT_EQ(x[1], 0.8f);
  float tiny[2] = {3e-8f, 4e-8f};  // |x| = 5e-8 < eps: divided by eps, not by |x|
  l2_normalize(tiny, 2, 1e-6f);
  EXPECT_FLOAT_EQ(tiny[0], 0.03f);
}

TEST(DeltaNet, ScalarRecurrenceOfTwoTokens) {
  // dk = dv = 2 by hand. Token 0 on a zero state: S = beta0 v0 k0^T, o0 = S (scale q0).
  // Token 1: S <- d S; u = beta1 (v1 - S k1); S += u k1^T.
  const float q[4] = {1, 0, 0, 1}, k[4] = {1, 0, 0.6f, 0.8f}, v[4] = {2, 4, 1, 1};
  const float beta[2] = {0.5f, 0.25f}, g[2] = {0, std::log(0.5f)};
  float state[4] = {0, 0, 0, 0}, out[4], scratch[64];
  scalar::delta_rule_recurrent(
      {2, 2, 2, q, 2, k, 2, v, 2, beta, g, 1, 2.0f, state, out, 2, scratch});
  // After token 0 (rows: key dims): S = [[1, 2], [0, 0]]; o0 = 2 * S^T q0 = (2, 4).
  EXPECT_FLOAT_EQ(out[0], 2);
  EXPECT_FLOAT_EQ(out[1], 4);
  // Token 1: S = [[0.5, 1], [0, 0]]; S^T k1 = (0.3, 0.6); u = 0.25 * (0.7, 0.4) = (0.175, 0.1);
  // S += k1 u^T -> [[0.605, 1.06], [0.14, 0.08]]; o1 = 2 * S^T q1 = 2 * (0.14, 0.08).
  EXPECT_NEAR(out[2], 0.28f, 1e-6);
  EXPECT_NEAR(out[3], 0.16f, 1e-6);
  EXPECT_NEAR(state[0], 0.605f, 1e-6);
  EXPECT_NEAR(state[1], 1.06f, 1e-6);
}

// Random heads of one sequence: unit q and k, beta in (0, 1), decays from e^-2 to 1.
struct HeadRun {
  int64_t n, dk, dv;
  std::vector<float> q, k, v, beta, g, state;
  HeadRun(std::mt19937& rng, int64_t n_, int64_t dk_, int64_t dv_) : n(n_), dk(dk_), dv(dv_) {
    q = random_vector(rng, n * dk, -1, 1);
    k = random_vector(rng, n * dk, -1, 1);
    for (int64_t t = 0; t < n; ++t) {
      l2_normalize(q.data() + t * dk, dk, 1e-6f);
      l2_normalize(k.data() + t * dk, dk, 1e-6f);
    }
    v = random_vector(rng, n * dv, -2, 2);
    beta = random_vector(rng, n, 0.05f, 0.95f);
    g = random_vector(rng, n, -2.0f, 0.0f);
    state = random_vector(rng, dk * dv, -0.5f, 0.5f);
  }
  // Runs `fn` over tokens [t0, t1) from `s`; writes out's rows.
  void apply(DeltaRuleFn fn, int64_t t0, int64_t t1, std::vector<float>& s,
             std::vector<float>& out) const {
    std::vector<float> scratch(static_cast<size_t>(delta_rule_scratch_floats(dk, dv)));
    fn({t1 - t0, dk, dv, q.data() + t0 * dk, dk, k.data() + t0 * dk, dk, v.data() + t0 * dv, dv,
        beta.data() + t0, g.data() + t0, 1, 1 / std::sqrt(float(dk)), s.data(),
        out.data() + t0 * dv, dv, scratch.data()});
  }
};

void expect_close(const std::vector<float>& got, const std::vector<float>& want, float tol,
                  const std::string& what) {
  ASSERT_EQ(got.size(), want.size());
  for (size_t i = 0; i < got.size(); ++i) {
    ASSERT_NEAR(got[i], want[i], tol * (1 + std::fabs(want[i]))) << what << " at " << i;
  }
}

// Every kernel (the scalar chunked form, each available ISA's recurrence and chunked form)
// against the scalar recurrence: outputs and final state, over runs shorter than a chunk, of
// exactly one, and spanning several with a remainder; the run cut in two calls as well.
TEST(DeltaNet, EveryKernelMatchesTheScalarRecurrence) {
  const CpuFeatures cpu = detect_cpu();
  std::mt19937 rng(11);
  struct Kernel {
    std::string name;
    DeltaRuleFn fn;
  };
  for (auto [dk, dv] : {std::pair<int64_t, int64_t>{64, 64}, {128, 128}, {32, 64}, {16, 48}}) {
    std::vector<Kernel> kernels{{"scalar chunked", &scalar::delta_rule_chunked}};
    for (Isa isa : {Isa::kAvx2, Isa::kAvx512, Isa::kNeon}) {
      if (best_isa(cpu, isa) != isa) continue;
      const std::string name(isa_name(isa));
      for (bool chunked : {false, true}) {
        DeltaRuleFn fn = delta_rule_kernel(isa, dv, chunked);
        if (fn == &scalar::delta_rule_recurrent || fn == &scalar::delta_rule_chunked) continue;
        kernels.push_back({name + (chunked ? " chunked" : " recurrent"), fn});
      }
    }
    for (int64_t n : {int64_t{1}, int64_t{7}, kDeltaChunk, 2 * kDeltaChunk + 13}) {
      const HeadRun run(rng, n, dk, dv);
      std::vector<float> want_state = run.state, want(static_cast<size_t>(n * dv));
      run.apply(&scalar::delta_rule_recurrent, 0, n, want_state, want);
      for (const Kernel& kernel : kernels) {
        const std::string what = kernel.name + " dk " + std::to_string(dk) + " dv " +
                                 std::to_string(dv) + " n " + std::to_string(n);
        std::vector<float> state = run.state, out(want.size());
        run.apply(kernel.fn, 0, n, state, out);
        expect_close(out, want, 2e-4f, what + " out");
        expect_close(state, want_state, 2e-4f, what + " state");
        // Two calls, the state carried between them.
        state = run.state;
        std::fill(out.begin(), out.end(), 0.0f);
        run.apply(kernel.fn, 0, n / 2, state, out);
        run.apply(kernel.fn, n / 2, n, state, out);
        expect_close(out, want, 2e-4f, what + " out in two calls");
        expect_close(state, want_state, 2e-4f, what + " state in two calls");
      }
    }
  }
}

}  // namespace
}  // namespace herd::kernels

#include "net/ring.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cmath>
#include <future>
#include <thread>

#include "net/loopback.h"
#include "util/error.h"

namespace herd::net {
namespace {

FrameLimits open_limits() {
  return FrameLimits{};
}

// A ring of p ranks over loopback pairs: links[i] joins rank i (its `a`) to rank i+1 (`b`).
struct Ring {
  std::vector<LoopbackPair> links;
  std::vector<std::unique_ptr<RingCollectives>> ranks;
};

Ring make_ring(int p, RingOptions options) {
  Ring ring;
  for (int i = 0; i < p; ++i) {
    ring.links.push_back(
        make_loopback_pair("rank" + std::to_string(i), "rank" + std::to_string((i + 1) % p)));
    ring.links.back().a->finish_handshake("rank" + std::to_string((i + 1) % p), open_limits());
    ring.links.back().b->finish_handshake("rank" + std::to_string(i), open_limits());
  }
  for (int i = 0; i < p; ++i) {
    auto next = ring.links[i].a;
    auto prev = ring.links[(i + p - 1) % p].b;
    ring.ranks.push_back(std::make_unique<RingCollectives>(i, p, next, prev, options));
  }
  return ring;
}

// Every rank holds data[j] = rank * 1000 + j / 2 (exact in f32 for these sizes); after the
// all-reduce every rank must hold the exact sum.
void check_all_reduce(Ring& ring, size_t n) {
  int p = static_cast<int>(ring.ranks.size());
  std::vector<std::vector<float>> data(p);
  for (int r = 0; r < p; ++r) {
    data[r].resize(n);
    for (size_t j = 0; j < n; ++j) data[r][j] = static_cast<float>(r * 1000) + (j % 4096) * 0.5f;
  }
  std::vector<std::future<void>> done;
  for (int r = 0; r < p; ++r) {
    done.push_back(std::async(std::launch::async,
                              [&, r] { ring.ranks[r]->all_reduce_sum(data[r].data(), n); }));
  }
  for (auto& d : done) d.get();
  for (size_t j = 0; j < n; ++j) {
    float expected = 0;
    for (int r = 0; r < p; ++r) expected += static_cast<float>(r * 1000) + (j % 4096) * 0.5f;
    for (int r = 0; r < p; ++r) {
      ASSERT_EQ(data[r][j], expected) << "p=" << p << " n=" << n << " rank=" << r << " j=" << j;
    }
  }
}

TEST(RingTest, AllReduceSumsForSeveralRankCountsAndUnevenSizes) {
  for (size_t small_bytes : {size_t{0}, size_t{64} << 10}) {  // segments, then whole vectors
    for (int p : {2, 3, 5}) {
      // 16 floats per chunk
      Ring ring = make_ring(p, RingOptions{Millis(5000), 64, small_bytes});
      for (size_t n : {0, 1, 2, 4, 7, 100, 1001}) check_all_reduce(ring, n);
    }
  }
}

// Rank r's vector: values of both signs and a spread of magnitudes, different per rank.
std::vector<float> coded_input(int r, size_t n) {
  std::vector<float> v(n);
  for (size_t j = 0; j < n; ++j) {
    v[j] = std::sin(static_cast<float>(r * 7 + 1) + static_cast<float>(j) * 0.37f) *
           static_cast<float>(1 + r + (j % 97) / 10);
  }
  return v;
}

// Runs one all-reduce of coded_input on every rank; returns each rank's result.
std::vector<std::vector<float>> run_coded(Ring& ring, size_t n) {
  const int p = static_cast<int>(ring.ranks.size());
  std::vector<std::vector<float>> data(p);
  for (int r = 0; r < p; ++r) data[r] = coded_input(r, n);
  std::vector<std::future<void>> done;
  for (int r = 0; r < p; ++r) {
    done.push_back(std::async(std::launch::async,
                              [&, r] { ring.ranks[r]->all_reduce_sum(data[r].data(), n); }));
  }
  for (auto& d : done) d.get();
  return data;
}

TEST(RingTest, CodedAllReducesGiveEveryRankTheSameBitsWithinTheCodesSteps) {
  for (WireDType dtype : {WireDType::F16, WireDType::Q8_0}) {
    for (size_t small_bytes : {size_t{0}, size_t{64} << 10}) {
      for (int p : {2, 3, 5}) {
        // 68-byte chunks: two q8_0 blocks or 34 halves per frame.
        Ring ring = make_ring(p, RingOptions{Millis(5000), 68, small_bytes, dtype});
        for (size_t n : {0, 1, 31, 32, 33, 100, 1001}) {
          const std::vector<std::vector<float>> got = run_coded(ring, n);
          for (size_t j = 0; j < n; ++j) {
            double exact = 0, magnitude = 0;
            for (int r = 0; r < p; ++r) {
              exact += coded_input(r, n)[j];
              magnitude += std::abs(coded_input(r, n)[j]);
            }
            // Each partial sum is coded once per step and the result once more: at most p
            // codings, each off by half a step (q8_0: max |x| of its block / 254, where
            // |x| <= sum over ranks of (10 + r) < p (10 + p); f16: 2^-11 relative).
            const double step = dtype == WireDType::Q8_0 ? p * (10.0 + p) / 254 : magnitude / 2048;
            ASSERT_NEAR(got[0][j], exact, p * step)
                << wire_dtype_name(dtype) << " p=" << p << " n=" << n << " j=" << j;
            for (int r = 1; r < p; ++r) {
              ASSERT_EQ(got[r][j], got[0][j]) << "rank " << r << " differs from rank 0";
            }
          }
        }
      }
    }
  }
}

TEST(RingTest, Q8AllReducesSendUnderAThirdOfTheBytesOfF32) {
  const size_t n = 4096 * 16;  // 16 tokens of a 4096-wide model: reduce-scatter + all-gather
  uint64_t sent[2] = {0, 0};
  for (WireDType dtype : {WireDType::F32, WireDType::Q8_0}) {
    Ring ring = make_ring(3, RingOptions{Millis(5000), size_t{4} << 20, size_t{64} << 10, dtype});
    run_coded(ring, n);
    for (const LoopbackPair& link : ring.links) {
      sent[dtype == WireDType::Q8_0] += link.a->stats().bytes_sent;
    }
  }
  EXPECT_LT(static_cast<double>(sent[1]), static_cast<double>(sent[0]) / 3.5)
      << "f32 " << sent[0] << " bytes, q8_0 " << sent[1];
}

TEST(RingTest, LargeVectorsInDefaultChunks) {
  Ring ring = make_ring(3, RingOptions{});
  check_all_reduce(ring, (size_t{3} << 20) + 17);
}

TEST(RingTest, TwoRanksMayShareOneConnection) {
  LoopbackPair pair = make_loopback_pair("rank0", "rank1");
  pair.a->finish_handshake("rank1", open_limits());
  pair.b->finish_handshake("rank0", open_limits());
  Ring ring;
  ring.ranks.push_back(std::make_unique<RingCollectives>(0, 2, pair.a, pair.a, RingOptions{}));
  ring.ranks.push_back(std::make_unique<RingCollectives>(1, 2, pair.b, pair.b, RingOptions{}));
  check_all_reduce(ring, 999);
  check_all_reduce(ring, 3);
}

TEST(RingTest, OneRankIsANoOp) {
  RingCollectives single(0, 1, nullptr, nullptr);
  std::vector<float> data = {1, 2, 3};
  single.all_reduce_sum(data.data(), data.size());
  EXPECT_EQ(data, (std::vector<float>{1, 2, 3}));
}

TEST(RingTest, AFailedNeighbourIsAnErrorNamingIt) {
  Ring ring = make_ring(3, RingOptions{Millis(2000), 1024});
  ring.links[0].a->fail("test: rank 0's link died");  // rank 1 receives from rank 0 over it
  std::vector<float> data(100, 1.f);
  EXPECT_THAT([&] { ring.ranks[1]->all_reduce_sum(data.data(), data.size()); },
              ::testing::ThrowsMessage<Error>(::testing::HasSubstr("peer 'rank0'")));
}

TEST(RingTest, ASilentNeighbourTimesOut) {
  Ring ring = make_ring(2, RingOptions{Millis(100), 1024});
  std::vector<float> data(10, 1.f);
  auto start = std::chrono::steady_clock::now();
  EXPECT_THAT([&] { ring.ranks[0]->all_reduce_sum(data.data(), data.size()); },
              ::testing::ThrowsMessage<Error>(::testing::HasSubstr("no frame within 100 ms")));
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(2));
}

TEST(RingTest, MismatchedStepsAreDetected) {
  Ring ring = make_ring(2, RingOptions{Millis(2000), 1024});
  std::vector<float> a(10, 1.f);
  std::vector<float> b(12, 1.f);  // the ranks disagree on n
  auto other = std::async(std::launch::async, [&] {
    try {
      ring.ranks[1]->all_reduce_sum(b.data(), b.size());
    } catch (const Error&) {
    }
  });
  EXPECT_THAT([&] { ring.ranks[0]->all_reduce_sum(a.data(), a.size()); },
              ::testing::ThrowsMessage<Error>(::testing::HasSubstr("all_reduce: peer 'rank1'")));
  ring.links[0].a->fail("test over");
  ring.links[1].a->fail("test over");
  other.get();
}

}  // namespace
}  // namespace herd::net

#include "net/ring.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

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

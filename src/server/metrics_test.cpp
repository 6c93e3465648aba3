// Prometheus text: counters by label, cumulative histogram buckets, gauges.
#include "server/metrics.h"

#include <gtest/gtest.h>

namespace herd::server {
namespace {

bool has_line(const std::string& text, const std::string& line) {
  return text.find("\n" + line + "\n") != std::string::npos || text.rfind(line + "\n", 0) == 0;
}

TEST(Metrics, PrometheusText) {
  Metrics m;
  m.count_request("chat_completions", 200);
  m.count_request("chat_completions", 200);
  m.count_request("completions", 503);
  m.add_prompt_tokens(30, 12);
  m.add_completion_tokens(7);
  m.observe_ttft(0.07);
  m.observe_ttft(3.0);
  m.set_queue(4, 2);
  const std::string t = m.prometheus();
  EXPECT_TRUE(has_line(t, "herd_requests_total{endpoint=\"chat_completions\",status=\"200\"} 2"))
      << t;
  EXPECT_TRUE(has_line(t, "herd_requests_total{endpoint=\"completions\",status=\"503\"} 1")) << t;
  EXPECT_TRUE(has_line(t, "herd_prompt_tokens_total 30")) << t;
  EXPECT_TRUE(has_line(t, "herd_prompt_tokens_cached_total 12")) << t;
  EXPECT_TRUE(has_line(t, "herd_completion_tokens_total 7")) << t;
  EXPECT_TRUE(has_line(t, "herd_queue_depth 4")) << t;
  EXPECT_TRUE(has_line(t, "herd_requests_running 2")) << t;
  // Buckets are cumulative: 0.07 s falls in le=0.1 and above, 3 s in le=5 and above.
  EXPECT_TRUE(has_line(t, "herd_time_to_first_token_seconds_bucket{le=\"0.05\"} 0")) << t;
  EXPECT_TRUE(has_line(t, "herd_time_to_first_token_seconds_bucket{le=\"0.1\"} 1")) << t;
  EXPECT_TRUE(has_line(t, "herd_time_to_first_token_seconds_bucket{le=\"2.5\"} 1")) << t;
  EXPECT_TRUE(has_line(t, "herd_time_to_first_token_seconds_bucket{le=\"5\"} 2")) << t;
  EXPECT_TRUE(has_line(t, "herd_time_to_first_token_seconds_bucket{le=\"+Inf\"} 2")) << t;
  EXPECT_TRUE(has_line(t, "herd_time_to_first_token_seconds_count 2")) << t;
  EXPECT_TRUE(has_line(t, "# TYPE herd_time_to_first_token_seconds histogram")) << t;
  const auto s = m.summary();
  EXPECT_EQ(s["requests"], 3);
  EXPECT_EQ(s["completion_tokens"], 7);
  EXPECT_EQ(s["queued"], 4);
}

}  // namespace
}  // namespace herd::server

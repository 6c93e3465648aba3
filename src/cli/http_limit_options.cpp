#include "cli/http_limit_options.h"

#include <chrono>
#include <string>

namespace herd::cli {
namespace {

// A deadline flag in seconds (fractions allowed) over a millisecond limit.
void add_seconds(CLI::App& cmd, const std::string& name, std::chrono::milliseconds& limit,
                 const std::string& what) {
  const double now = static_cast<double>(limit.count()) / 1000;
  cmd.add_option_function<double>(
         name,
         [&limit](double seconds) {
           limit = std::chrono::milliseconds(static_cast<int64_t>(seconds * 1000));
         },
         what + " (seconds, default " + CLI::detail::to_string(now) + ")")
      ->check(CLI::Range(0.001, 86400.0));
}

}  // namespace

void add_http_limit_options(CLI::App& cmd, http::HttpLimits& limits) {
  cmd.add_option("--max-body", limits.max_body_bytes,
                 "Largest request body in bytes (chunked ones too; compressed ones are refused)")
      ->capture_default_str();
  cmd.add_option("--max-header", limits.max_header_bytes,
                 "Largest request line and headers, in bytes")
      ->capture_default_str();
  add_seconds(cmd, "--header-timeout", limits.header_timeout,
              "A request's headers must arrive within this of its first byte");
  add_seconds(cmd, "--body-timeout", limits.body_timeout,
              "A request's body must arrive within this of its headers");
  cmd.add_option("--max-connections", limits.max_connections,
                 "Open connections (a streamed answer holds one); at the cap, the oldest "
                 "unfinished request's connection is dropped, or the newcomer gets 503")
      ->capture_default_str()
      ->check(CLI::Range(1, 100000));
  cmd.add_option("--max-connections-per-address", limits.max_connections_per_address,
                 "Open connections from one client address, as --max-connections")
      ->capture_default_str()
      ->check(CLI::Range(1, 100000));
}

}  // namespace herd::cli

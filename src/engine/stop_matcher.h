// StopMatcher: the stop strings of a request (OpenAI's "stop", herd run --stop). Text is
// held back while it might be the start of one, so a stop string is never streamed.
#pragma once

#include <string>
#include <string_view>
#include <vector>

namespace herd::engine {

// Holds back text that might be the start of a stop string, so that a stop string is
// never streamed. push() returns the text safe to emit; `stopped` turns true when a stop
// string has appeared (the text before it is returned, the rest dropped).
class StopMatcher {
 public:
  explicit StopMatcher(std::vector<std::string> stops) : stops_(std::move(stops)) {}
  std::string push(std::string_view text);
  std::string flush();  // what is held, at the end of generation
  bool stopped() const { return stopped_; }

 private:
  std::vector<std::string> stops_;
  std::string held_;
  bool stopped_ = false;
};

}  // namespace herd::engine

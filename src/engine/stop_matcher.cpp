#include "engine/stop_matcher.h"

#include <algorithm>

namespace herd::engine {

std::string StopMatcher::push(std::string_view text) {
  if (stopped_) return {};
  held_ += text;
  size_t first = std::string::npos;
  for (const std::string& s : stops_) {
    if (s.empty()) continue;
    first = std::min(first, held_.find(s));
  }
  if (first != std::string::npos) {
    stopped_ = true;
    std::string out = held_.substr(0, first);
    held_.clear();
    return out;
  }
  // Keep the longest tail of held_ that is a prefix of some stop string.
  size_t keep = 0;
  for (const std::string& s : stops_) {
    if (s.empty()) continue;
    // A whole stop string would have been found above, so at most size - 1 of it is held.
    for (size_t n = std::min(s.size() - 1, held_.size()); n > keep; --n) {
      if (held_.compare(held_.size() - n, n, s, 0, n) == 0) {
        keep = n;
        break;
      }
    }
  }
  std::string out = held_.substr(0, held_.size() - keep);
  held_.erase(0, held_.size() - keep);
  return out;
}

std::string StopMatcher::flush() {
  std::string out = stopped_ ? std::string() : held_;
  held_.clear();
  return out;
}

}  // namespace herd::engine

// A log that tests read while a transport writes to it from its threads (LogFn).
#pragma once

#include <cstddef>
#include <mutex>
#include <string>
#include <string_view>
#include <vector>

#include "net/transport.h"

namespace herd::net {

struct TestLog {
  std::mutex mutex;
  std::vector<std::string> lines;
  LogFn fn() {
    return [this](std::string_view line) {
      std::lock_guard lock(mutex);
      lines.emplace_back(line);
    };
  }
  std::string all() {
    std::lock_guard lock(mutex);
    std::string out;
    for (const auto& l : lines) out += l + "\n";
    return out;
  }
  // Lines holding `what`.
  size_t count(const std::string& what) {
    std::lock_guard lock(mutex);
    size_t n = 0;
    for (const auto& l : lines) n += l.find(what) != std::string::npos;
    return n;
  }
};

}  // namespace herd::net

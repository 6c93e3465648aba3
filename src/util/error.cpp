#include "util/error.h"

namespace herd {

namespace {

std::string prefixed(std::string_view module, std::string_view message) {
  std::string out;
  out.reserve(module.size() + message.size() + 3);
  out.append("[").append(module).append("] ").append(message);
  return out;
}

}  // namespace

Error::Error(std::string_view module, std::string_view message)
    : std::runtime_error(prefixed(module, message)) {}

void check_failed(const char* file, int line, const char* condition, const std::string& detail) {
  std::string message = std::string("[check] ") + file + ":" + std::to_string(line) +
                        ": internal error: " + condition + " failed";
  if (!detail.empty()) message += " (" + detail + ")";
  throw Error(message);
}

}  // namespace herd

// herd::Error: the one exception type for problems the outside world can cause (files,
// sockets, JSON, templates, arguments). Its message starts with the module in brackets,
// e.g. "[gguf] tensor 'blk.3.attn_q.weight': offset 123 beyond file size 100".
// HERD_CHECK is for bugs: a broken invariant throws herd::Error naming file, line and
// the failed condition (library code never calls exit()).
#pragma once

#include <stdexcept>
#include <string>
#include <string_view>

namespace herd {

class Error : public std::runtime_error {
 public:
  explicit Error(const std::string& message) : std::runtime_error(message) {}
  // Error("gguf", "bad magic") -> "[gguf] bad magic"
  Error(std::string_view module, std::string_view message);
};

[[noreturn]] void check_failed(const char* file, int line, const char* condition,
                               const std::string& detail);

}  // namespace herd

#define HERD_CHECK(cond)                                              \
  do {                                                                \
    if (!(cond)) ::herd::check_failed(__FILE__, __LINE__, #cond, ""); \
  } while (0)

// HERD_CHECK_MSG(n < cap, "n=" + std::to_string(n)): the message says which values broke it.
#define HERD_CHECK_MSG(cond, detail)                                      \
  do {                                                                    \
    if (!(cond)) ::herd::check_failed(__FILE__, __LINE__, #cond, detail); \
  } while (0)

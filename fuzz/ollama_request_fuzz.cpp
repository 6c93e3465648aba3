// libFuzzer target: arbitrary bytes as the body of Ollama's /api/chat and /api/generate
// (ollama_request.h), the messages turned into OpenAI's shape and the format's schema
// compiled. An ApiError with 400 is the expected refusal; anything else -- a crash, a hang, a
// sanitizer report, another exception -- is a bug.
#include <cstdint>
#include <string_view>

#include "server/ollama_request.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view input(reinterpret_cast<const char*>(data), size);
  try {
    herd::server::parse_ollama_chat(input);
  } catch (const herd::server::ApiError& e) {
    if (e.status() != 400) __builtin_trap();
  }
  try {
    herd::server::parse_ollama_generate(input);
  } catch (const herd::server::ApiError& e) {
    if (e.status() != 400) __builtin_trap();
  }
  return 0;
}

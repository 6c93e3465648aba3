// libFuzzer target: any bytes given to the GGUF reader either parse, with every tensor's
// data inside the input, or fail with herd::Error. Anything else (a crash, a sanitizer
// report, another exception type) is a bug.
#include <cstdint>
#include <cstdlib>
#include <span>

#include "gguf/reader.h"
#include "util/error.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  try {
    herd::gguf::File file = herd::gguf::File::parse(std::span<const uint8_t>(data, size));
    for (const herd::gguf::TensorInfo& t : file.tensors()) {
      if (t.data < data || t.data + t.n_bytes > data + size) std::abort();
      volatile uint8_t sink = t.n_bytes > 0 ? t.data[t.n_bytes - 1] : 0;
      (void)sink;
    }
    for (const auto& [key, value] : file.metadata()) {
      if (value.type == herd::gguf::ValueType::ARRAY &&
          value.elem_type != herd::gguf::ValueType::STRING) {
        (void)file.get_f32_array(key);
      }
    }
  } catch (const herd::Error&) {
  }
  return 0;
}

// libFuzzer target: a repository listing from a hub or a mirror (HF_ENDPOINT may name any
// server) given to the store's parser either parses or fails with herd::Error, and every
// path it accepts is one the store may create (relative, no "..", no empty component).
// Picking a model from it and naming it never fails another way. The same bytes as a model
// name (what --model may hold) parse or are refused, and a name that parses prints back to
// one that parses the same.
#include <cstdint>
#include <cstdlib>
#include <string>
#include <string_view>

#include "store/hf_listing.h"
#include "util/error.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace herd::store;
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  if (std::optional<ModelName> name = parse_model_name(text)) {
    std::optional<ModelName> again = parse_model_name(name->str());
    if (!again || again->str() != name->str()) std::abort();
  }
  next_page_url(text);
  std::vector<RepoFile> files;
  try {
    files = parse_listing(text);
  } catch (const herd::Error&) {
    return 0;
  }
  for (const RepoFile& f : files) {
    if (f.path.empty() || f.path.front() == '/') std::abort();
    for (size_t begin = 0; begin <= f.path.size();) {
      size_t end = f.path.find('/', begin);
      if (end == std::string::npos) end = f.path.size();
      const std::string_view part = std::string_view(f.path).substr(begin, end - begin);
      if (part.empty() || part == "." || part == "..") std::abort();
      begin = end + 1;
    }
    quant_of(f.path);
  }
  for (const char* quant : {"", "Q4_K_M", "q8_0", "mmproj", "UD-Q4_K_XL"}) {
    try {
      const ModelFiles m = pick_model(files, ModelName{"o", "r", quant});
      if (m.files.empty()) std::abort();
    } catch (const herd::Error&) {
    }
  }
  describe_choices(gguf_models(files));
  return 0;
}

// herd eval: run token ids as one sequence and write the logits after every position, in
// the format of ../shared/models (float32 little-endian rows of n_vocab).
#include <cstdio>
#include <memory>

#include "cli/commands.h"
#include "cli/model_options.h"
#include "engine/generate.h"
#include "util/error.h"

namespace herd::cli {
namespace {

std::vector<int32_t> parse_ids(const std::string& text) {
  std::vector<int32_t> ids;
  size_t pos = 0;
  while (pos < text.size()) {
    size_t end = text.find_first_of(", ", pos);
    if (end == std::string::npos) end = text.size();
    if (end > pos) {
      const std::string item = text.substr(pos, end - pos);
      size_t used = 0;
      long long v = -1;
      try {
        v = std::stoll(item, &used);
      } catch (const std::exception&) {
        used = 0;
      }
      if (used != item.size() || v < 0 || v > INT32_MAX) {
        throw Error("cli", "--tokens: '" + item + "' is not a token id");
      }
      ids.push_back(static_cast<int32_t>(v));
    }
    pos = end + 1;
  }
  if (ids.empty()) throw Error("cli", "--tokens: no token ids given");
  return ids;
}

}  // namespace

void add_eval(CLI::App& app) {
  auto* cmd = app.add_subcommand("eval", "Run token ids and dump the logits of every position");
  auto model = std::make_shared<ModelOptions>();
  auto tokens = std::make_shared<std::string>();
  auto out = std::make_shared<std::string>();
  auto batch = std::make_shared<int64_t>(512);
  model->add_to(*cmd);
  cmd->add_option("--tokens", *tokens, "Token ids, e.g. 1,2,3")->required();
  cmd->add_option("--dump-logits", *out, "Output file: float32 rows of n_vocab per position")
      ->required();
  cmd->add_option("-b,--batch", *batch, "Tokens per forward pass")->capture_default_str();
  cmd->callback([model, tokens, out, batch] {
    std::vector<int32_t> ids = parse_ids(*tokens);
    auto runner = model->open();
    const std::vector<float> all = engine::forward_sequence(*runner, ids, 0, *batch, true);
    FILE* f = std::fopen(out->c_str(), "wb");
    if (f == nullptr) throw Error("cli", "cannot create '" + *out + "'");
    const size_t written = std::fwrite(all.data(), sizeof(float), all.size(), f);
    if (std::fclose(f) != 0 || written != all.size()) {
      std::remove(out->c_str());
      throw Error("cli", "cannot write '" + *out + "'");
    }
    std::fprintf(stderr, "eval: %zu positions x %lld logits -> %s\n", ids.size(),
                 static_cast<long long>(runner->hparams().n_vocab), out->c_str());
  });
}

}  // namespace herd::cli

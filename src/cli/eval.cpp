// herd eval: run token ids as one sequence and write the logits after every position, in
// the format of ../shared/models (float32 little-endian rows of n_vocab). One request of the
// prompt alone through the scheduler, its logits streamed to the file as each pass yields
// them (a long sequence's rows are not all held in memory).
#include <cstdio>
#include <memory>

#include "cli/commands.h"
#include "cli/model_options.h"
#include "engine/scheduler.h"
#include "tokenizer/tokenizer.h"
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
    const tokenizer::Tokenizer tok = tokenizer::Tokenizer::from_gguf(runner->file());
    engine::SchedulerOptions so;
    so.batch_tokens = *batch;
    engine::Scheduler scheduler(*runner, tok, so, nullptr);
    engine::GenerationParams g;
    g.prompt = ids;
    g.max_tokens = 0;
    g.prompt_logits = true;
    FILE* f = std::fopen(out->c_str(), "wb");
    if (f == nullptr) throw Error("cli", "cannot create '" + *out + "'");
    size_t written = 0, rows = 0;
    engine::Finish finish;
    try {
      auto stream = scheduler.submit(std::move(g));
      finish = scheduler.drive(*stream, [&](const engine::StreamUpdate& u) {
        written += std::fwrite(u.logits.data(), sizeof(float), u.logits.size(), f);
        rows += u.logits.size();
        return written == rows;
      });
    } catch (...) {
      std::fclose(f);
      std::remove(out->c_str());
      throw;
    }
    const bool failed = finish.reason != engine::FinishReason::kLength || written != rows ||
                        rows != ids.size() * static_cast<size_t>(runner->hparams().n_vocab);
    if (std::fclose(f) != 0 || failed) {
      std::remove(out->c_str());
      if (finish.reason == engine::FinishReason::kError) throw Error("cli", finish.error);
      throw Error("cli", "cannot write '" + *out + "'");
    }
    std::fprintf(stderr, "eval: %zu positions x %lld logits -> %s\n", ids.size(),
                 static_cast<long long>(runner->hparams().n_vocab), out->c_str());
  });
}

}  // namespace herd::cli

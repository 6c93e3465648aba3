// herd run: generate a continuation of a prompt (or, with --chat, a reply to it as a user
// message rendered with the model's chat template), streamed to stdout; timings on stderr.
// One request through the scheduler, the loop `herd serve` runs, stepped on this thread: the
// same stops, sampling and speculative decoding as a served request.
#include <cstdio>
#include <memory>

#include <nlohmann/json.hpp>

#include "chat/template.h"
#include "cli/commands.h"
#include "cli/model_options.h"
#include "cli/speculative_options.h"
#include "engine/scheduler.h"
#include "tokenizer/tokenizer.h"
#include "util/error.h"

namespace herd::cli {
namespace {

struct RunOptions {
  ModelOptions model;
  std::string prompt;
  std::string system;
  int64_t n_predict = 128;
  engine::SamplerParams sampler;
  bool chat = false;
  bool no_think = false;
  std::vector<std::string> stops;
  SpeculativeOptions speculative;
};

// The prompt as the model's template renders a one-message conversation.
std::string render_chat(const gguf::File& file, const tokenizer::Tokenizer& tok,
                        const RunOptions& o) {
  auto source = file.get_string_or("tokenizer.chat_template");
  if (!source) throw Error("cli", "--chat: the model has no chat template");
  nlohmann::ordered_json messages = nlohmann::ordered_json::array();
  if (!o.system.empty()) messages.push_back({{"role", "system"}, {"content", o.system}});
  messages.push_back({{"role", "user"}, {"content", o.prompt}});
  auto token_string = [&](std::optional<int32_t> id) -> std::optional<std::string> {
    if (!id) return std::nullopt;
    return std::string(tok.token_text(*id));
  };
  nlohmann::ordered_json extra = nlohmann::ordered_json::object();
  if (o.no_think) extra["enable_thinking"] = false;
  chat::Template tmpl = chat::Template::parse(std::string(*source));
  return tmpl.render(chat::chat_variables(messages, nullptr, true, token_string(tok.bos()),
                                          token_string(tok.eos()), extra));
}

}  // namespace

void add_run(CLI::App& app) {
  auto* cmd = app.add_subcommand("run", "Generate text from a prompt");
  auto o = std::make_shared<RunOptions>();
  o->model.add_to(*cmd);
  cmd->add_option("-p,--prompt", o->prompt, "Prompt text")->required();
  cmd->add_option("-n,--n-predict", o->n_predict,
                  "Tokens to generate (-1: until the context is full)")
      ->capture_default_str();
  cmd->add_option("--temp", o->sampler.temperature, "Temperature (0: greedy)")
      ->capture_default_str();
  cmd->add_option("--top-k", o->sampler.top_k, "Top-k (0: off)")->capture_default_str();
  cmd->add_option("--top-p", o->sampler.top_p, "Top-p (1: off)")->capture_default_str();
  cmd->add_option("--min-p", o->sampler.min_p, "Min-p (0: off)")->capture_default_str();
  cmd->add_option("--repeat-penalty", o->sampler.repeat_penalty, "Repetition penalty (1: off)")
      ->capture_default_str();
  cmd->add_option("--presence-penalty", o->sampler.presence_penalty)->capture_default_str();
  cmd->add_option("--frequency-penalty", o->sampler.frequency_penalty)->capture_default_str();
  cmd->add_option("--seed", o->sampler.seed, "Sampling seed")->capture_default_str();
  cmd->add_option("--stop", o->stops, "Stop string (repeatable)");
  cmd->add_flag("--chat", o->chat, "Treat the prompt as a user message of the chat template");
  cmd->add_option("--system", o->system, "System message (with --chat)");
  o->speculative.add_to(*cmd, "Speculative decoding");
  cmd->add_flag("--no-think", o->no_think, "With --chat: ask the template to skip reasoning");
  cmd->callback([o] {
    o->speculative.apply(o->model);
    auto runner = o->model.open();
    o->speculative.warn_without_head(*runner, "run");
    tokenizer::Tokenizer tok = tokenizer::Tokenizer::from_gguf(runner->file());
    std::vector<int32_t> prompt;
    if (o->chat) {
      // The template writes the special tokens itself (BOS included where it wants one).
      prompt = tok.encode(render_chat(runner->file(), tok, *o), false, true);
    } else {
      prompt = tok.encode(o->prompt, true, false);
      std::fwrite(o->prompt.data(), 1, o->prompt.size(), stdout);
    }
    std::unique_ptr<engine::ModelRunner> draft = o->speculative.open_draft(o->model, *runner, 1);
    engine::SchedulerOptions so;
    so.draft = draft.get();
    engine::Scheduler scheduler(*runner, tok, so, nullptr);
    engine::GenerationParams g;
    g.prompt = std::move(prompt);
    g.max_tokens = o->n_predict;
    g.sampler = o->sampler;
    g.stop = o->stops;
    g.speculative = o->speculative.params();
    auto stream = scheduler.submit(std::move(g));
    const engine::Finish f = scheduler.drive(*stream, [](const engine::StreamUpdate& u) {
      std::fwrite(u.text.data(), 1, u.text.size(), stdout);
      std::fflush(stdout);
      return true;
    });
    std::fputc('\n', stdout);
    if (f.reason == engine::FinishReason::kError) throw Error("run", f.error);
    const double n_gen = static_cast<double>(f.n_completion);
    std::string drafts;
    if (f.n_drafted > 0) {
      drafts = "; drafts kept " + std::to_string(f.n_draft_accepted) + " of " +
               std::to_string(f.n_drafted) + " (" + std::to_string(f.n_target_steps) +
               " forward passes)";
    }
    if (f.n_replayed > 0) {
      drafts +=
          "; replayed " + std::to_string(f.n_replayed) + " tokens after the runner lost its states";
    }
    std::fprintf(stderr,
                 "\nrun: prompt %lld tokens in %.3f s (%.1f tok/s); generated %lld tokens in "
                 "%.3f s (%.1f tok/s); stop: %s%s; %s\n",
                 static_cast<long long>(f.n_prompt), f.prefill_seconds,
                 f.prefill_seconds > 0 ? static_cast<double>(f.n_prompt) / f.prefill_seconds : 0.0,
                 static_cast<long long>(f.n_completion), f.decode_seconds,
                 f.decode_seconds > 0 ? n_gen / f.decode_seconds : 0.0,
                 std::string(engine::finish_reason_name(f.reason)).c_str(), drafts.c_str(),
                 runner->describe().c_str());
  });
}

}  // namespace herd::cli

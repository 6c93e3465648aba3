// herd chat-template (--model M | --template FILE) --messages FILE.json [--tools FILE.json]
//   [--kwargs FILE.json] [--add-generation-prompt] [--bos S] [--eos S]
// Prints a conversation rendered through a chat template exactly as Hugging Face
// transformers' apply_chat_template would, with no newline added. With --model the template
// and the BOS/EOS token texts come from the GGUF file; --bos/--eos override them. --kwargs
// holds extra template variables (e.g. {"enable_thinking": false}). When the template calls
// raise_exception(message), the command fails with that message.
#include <cstdio>
#include <memory>
#include <optional>
#include <string>

#include <nlohmann/json.hpp>

#include "chat/template.h"
#include "cli/commands.h"
#include "cli/store_options.h"
#include "gguf/reader.h"
#include "util/error.h"
#include "util/mapped_file.h"

namespace herd::cli {
namespace {

struct ModelTemplate {
  std::string source;
  std::optional<std::string> bos;  // nullopt: the tokenizer has no such token
  std::optional<std::string> eos;
};

// The chat template of a GGUF model (metadata `tokenizer.chat_template`) and the texts of
// its BOS/EOS tokens (`tokenizer.ggml.tokens[tokenizer.ggml.{bos,eos}_token_id]`).
ModelTemplate load_model_template(const std::string& path) {
  const gguf::File file = gguf::File::open(path);
  const auto source = file.get_string_or("tokenizer.chat_template");
  if (!source)
    throw Error("cli", path + ": the model has no chat template (tokenizer.chat_template)");
  ModelTemplate t{std::string(*source), std::nullopt, std::nullopt};
  if (!file.has("tokenizer.ggml.tokens")) return t;
  const auto& tokens = file.get_string_array("tokenizer.ggml.tokens");
  const auto token_text = [&](const char* key) -> std::optional<std::string> {
    const auto id = file.get_u64_opt(key);
    if (!id) return std::nullopt;
    if (*id >= tokens.size())
      throw Error("cli", path + ": " + key + " " + std::to_string(*id) +
                             " is not a token id (vocabulary of " + std::to_string(tokens.size()) +
                             ")");
    return std::string(tokens[*id]);
  };
  t.bos = token_text("tokenizer.ggml.bos_token_id");
  t.eos = token_text("tokenizer.ggml.eos_token_id");
  return t;
}

nlohmann::ordered_json read_json(const std::string& path, const char* what) {
  const std::string text = read_file(path);
  try {
    return nlohmann::ordered_json::parse(text);
  } catch (const nlohmann::json::exception& e) {
    throw Error("cli", path + ": invalid JSON for " + what + ": " + e.what());
  }
}

}  // namespace

void add_chat_template(CLI::App& app) {
  auto* cmd = app.add_subcommand("chat-template", "Render a conversation through a chat template");
  struct Options {
    std::string model;
    std::string template_path;
    std::string messages_path;
    std::string tools_path;
    std::string kwargs_path;
    bool add_generation_prompt = false;
    std::optional<std::string> bos;
    std::optional<std::string> eos;
  };
  auto opt = std::make_shared<Options>();
  auto* model = cmd->add_option("-m,--model", opt->model, "GGUF model whose chat template to use");
  auto* tmpl = cmd->add_option("--template", opt->template_path, "Jinja chat template file");
  model->excludes(tmpl);
  cmd->add_option("--messages", opt->messages_path, "JSON file: the list of messages")->required();
  cmd->add_option("--tools", opt->tools_path, "JSON file: the list of tools");
  cmd->add_option("--kwargs", opt->kwargs_path, "JSON file: an object of extra template variables");
  cmd->add_flag("--add-generation-prompt", opt->add_generation_prompt,
                "End with the prompt for the assistant's reply");
  cmd->add_option("--bos", opt->bos, "BOS token text (default: the model's; none with --template)");
  cmd->add_option("--eos", opt->eos, "EOS token text (default: the model's; none with --template)");
  cmd->callback([opt] {
    if (opt->model.empty() && opt->template_path.empty())
      throw Error("cli", "chat-template needs --model or --template");
    ModelTemplate source;
    if (!opt->model.empty()) {
      source = load_model_template(resolve_model_arg(opt->model));
    } else {
      source.source = read_file(opt->template_path);
    }
    if (opt->bos) source.bos = opt->bos;
    if (opt->eos) source.eos = opt->eos;

    const auto messages = read_json(opt->messages_path, "--messages");
    if (!messages.is_array())
      throw Error("cli", opt->messages_path + ": --messages must be a JSON array");
    std::optional<nlohmann::ordered_json> tools;
    if (!opt->tools_path.empty()) tools = read_json(opt->tools_path, "--tools");
    nlohmann::ordered_json kwargs = nlohmann::ordered_json::object();
    if (!opt->kwargs_path.empty()) {
      kwargs = read_json(opt->kwargs_path, "--kwargs");
      if (!kwargs.is_object())
        throw Error("cli", opt->kwargs_path + ": --kwargs must be a JSON object");
    }

    const auto chat = chat::Template::parse(std::move(source.source));
    const auto variables =
        chat::chat_variables(messages, tools ? &*tools : nullptr, opt->add_generation_prompt,
                             source.bos, source.eos, kwargs);
    const std::string text = chat.render(variables);  // real local time for strftime_now
    std::fwrite(text.data(), 1, text.size(), stdout);
    std::fflush(stdout);
  });
}

}  // namespace herd::cli

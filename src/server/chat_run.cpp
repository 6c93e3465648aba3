#include "server/chat_run.h"

#include "server/argument_types.h"
#include "server/http_server.h"
#include "server/tool_call_grammar.h"

namespace herd::server {

using ojson = nlohmann::ordered_json;

void check_model(const std::string& requested, const ServedModel& m) {
  if (!requested.empty() && requested != m.id) {
    throw ApiError(404,
                   "the model '" + requested + "' does not exist (this server has '" + m.id + "')",
                   "invalid_request_error", "model", "model_not_found");
  }
}

engine::GenerationParams generation_params(const SamplingRequest& r) {
  engine::GenerationParams g;
  g.max_tokens = r.max_tokens;
  g.sampler = r.sampler;
  g.stop = r.stop;
  g.top_logprobs = r.top_logprobs;
  g.stop_at_eog = !r.ignore_eos;
  g.speculative = r.speculative;
  return g;
}

ChatRun prepare_chat(const ServedModel& m, const ChatRequest& r, uint64_t n) {
  if (!m.chat_template) {
    throw ApiError(400, "the model has no chat template; use /v1/completions",
                   "invalid_request_error", "messages");
  }
  std::string prompt;
  try {
    const ojson messages = arguments_as_objects(r.messages);
    auto render = [&](const ojson& m_messages) {
      return m.chat_template->render(chat::chat_variables(m_messages,
                                                          r.tools.is_null() ? nullptr : &r.tools,
                                                          true, m.bos, m.eos, r.template_kwargs));
    };
    try {
      prompt = render(messages);
    } catch (const chat::TemplateRaised&) {
      throw;
    } catch (const Error&) {
      // Some templates (gpt-oss's) look inside every message's content, which fails on the
      // null content OpenAI clients send beside tool calls: those read "" instead. Another
      // failure is the first one's.
      const ojson filled = null_content_as_empty(messages);
      if (filled == messages) throw;
      try {
        prompt = render(filled);
      } catch (const Error&) {
        render(messages);  // throws the first failure again
        throw;
      }
    }
  } catch (const chat::TemplateRaised& e) {
    throw ApiError(400, "the chat template refused the messages: " + e.message(),
                   "invalid_request_error", "messages");
  } catch (const Error& e) {
    throw ApiError(400, std::string("the chat template failed: ") + e.what(),
                   "invalid_request_error", "messages");
  }
  const bool parse_tools = !r.tools.is_null() && r.tool_choice.kind != ToolChoice::Kind::kNone;
  OutputParserOptions po;
  set_reasoning(po, m.template_source, prompt);
  po.harmony = uses_harmony(m.template_source);
  po.tools = parse_tools ? detect_tool_format(m.template_source) : ToolFormat::kNone;
  po.id_prefix = "call_" + std::to_string(n) + "_";
  if (parse_tools) po.parameter_types = parameter_types(r.tools);
  std::shared_ptr<const JsonGrammar> grammar = r.response_format.grammar;
  if (grammar && !r.tool_choice.forces_call()) {
    // A reply held to JSON is content only: it skips the reasoning the template opened (as a
    // forced call does), and markers inside its strings are text, not calls or reasoning.
    if (po.starts_in_reasoning) prompt += std::string(po.reasoning_markers.close) + "\n\n";
    // Harmony: the JSON is the final channel's message, which the prompt opens.
    if (po.harmony) prompt += "<|channel|>final<|message|>";
    po.reasoning = po.starts_in_reasoning = po.harmony = false;
    po.tools = ToolFormat::kNone;
  }
  if (r.tool_choice.forces_call()) {
    // A call is forced by writing its opening at the end of the prompt, in the family's
    // format (generation continues inside the call), and by holding the rest of it to the
    // function's name and parameters.
    if (!can_force_calls(po.tools)) {
      throw ApiError(400,
                     "tool_choice cannot be enforced for this model's chat template: it shows no "
                     "tool-call format herd reads",
                     "invalid_request_error", "tool_choice");
    }
    po.forced_call = true;
    po.forced_name = r.tool_choice.function;
    po.tool_names = tool_names(r.tools);
    prompt += forced_reply_opening(po);
    // Where arguments are not JSON the opening alone forces the call (and a stop ends it).
    grammar = grammar_holds_arguments(po.tools) ? forced_call_grammar(po, r.tools) : nullptr;
  }

  engine::GenerationParams g = generation_params(r.sampling);
  if (po.forced_call && !grammar) g.stop.emplace_back(call_block_end(po.tools));
  // Tool-call markers may be control tokens ([TOOL_CALLS], <|python_tag|>), and so are
  // harmony's channel markers.
  g.render_special = po.tools != ToolFormat::kNone || po.harmony;
  // The template writes the special tokens itself (BOS included where it wants one).
  g.prompt = m.tokenizer->encode(prompt, false, true);
  return {std::move(g), std::move(grammar), std::move(po)};
}

ChatRun prepare_completion(const ServedModel& m, const CompletionRequest& r) {
  engine::GenerationParams g = generation_params(r.sampling);
  // A text prompt gets the model's BOS, as `herd run` gives it.
  g.prompt = r.prompt_text ? m.tokenizer->encode(*r.prompt_text, true, false) : r.prompt_tokens;
  if (g.prompt.empty())
    throw ApiError(400, "the prompt has no tokens", "invalid_request_error", "prompt");
  return {std::move(g), r.response_format.grammar, {}};
}

}  // namespace herd::server

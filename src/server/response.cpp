#include "server/response.h"

namespace herd::server {

using json = nlohmann::json;

std::string json_text(const json& value) {
  return value.dump(-1, ' ', false, json::error_handler_t::replace);
}

json herd_extension(const std::vector<int32_t>& tokens) {
  return {{"completion_token_ids", tokens}};
}

std::string sse_event(const json& value) {
  return "data: " + json_text(value) + "\n\n";
}

std::string sse_done() {
  return "data: [DONE]\n\n";
}

json usage_json(const engine::Finish& f) {
  return {{"prompt_tokens", f.n_prompt},
          {"completion_tokens", f.n_completion},
          {"total_tokens", f.n_prompt + f.n_completion},
          {"prompt_tokens_details", {{"cached_tokens", f.n_cached}}}};
}

json logprobs_json(const tokenizer::Tokenizer& tokenizer,
                   const std::vector<engine::TokenLogprob>& lps) {
  auto token_entry = [&](int32_t id, float logprob) {
    std::string piece;
    tokenizer.append_piece(id, false, piece);
    json bytes = json::array();
    for (unsigned char c : piece) bytes.push_back(static_cast<int>(c));
    return json{{"token", piece}, {"logprob", logprob}, {"bytes", bytes}};
  };
  json content = json::array();
  for (const engine::TokenLogprob& lp : lps) {
    json entry = token_entry(lp.token, lp.logprob);
    json top = json::array();
    for (const engine::TopLogprob& t : lp.top) top.push_back(token_entry(t.token, t.logprob));
    entry["top_logprobs"] = top;
    content.push_back(entry);
  }
  return {{"content", content}};
}

json completion_logprobs_json(const tokenizer::Tokenizer& tokenizer,
                              const std::vector<engine::TokenLogprob>& lps, int64_t text_offset0) {
  json tokens = json::array(), token_logprobs = json::array(), top = json::array(),
       offsets = json::array();
  int64_t offset = text_offset0;
  for (const engine::TokenLogprob& lp : lps) {
    std::string piece;
    tokenizer.append_piece(lp.token, false, piece);
    tokens.push_back(piece);
    token_logprobs.push_back(lp.logprob);
    offsets.push_back(offset);
    offset += static_cast<int64_t>(piece.size());
    json alternatives = json::object();
    for (const engine::TopLogprob& t : lp.top) {
      std::string alt;
      tokenizer.append_piece(t.token, false, alt);
      alternatives[alt] = t.logprob;  // dumped with invalid UTF-8 replaced, as values are
    }
    top.push_back(alternatives);
  }
  return {{"tokens", tokens},
          {"token_logprobs", token_logprobs},
          {"top_logprobs", top},
          {"text_offset", offsets}};
}

std::string openai_finish_reason(const engine::Finish& finish, bool has_tool_calls) {
  if (has_tool_calls) return "tool_calls";
  return finish.reason == engine::FinishReason::kLength ? "length" : "stop";
}

json chat_delta(const ParsedDelta& delta) {
  json d = json::object();
  if (!delta.content.empty()) d["content"] = delta.content;
  if (!delta.reasoning.empty()) d["reasoning_content"] = delta.reasoning;
  if (!delta.tool_calls.empty()) {
    json calls = json::array();
    for (const ToolCall& c : delta.tool_calls) {
      // A call's first piece names it; later ones only add to its arguments.
      if (c.id.empty()) {
        calls.push_back({{"index", c.index}, {"function", {{"arguments", c.arguments}}}});
      } else {
        calls.push_back({{"index", c.index},
                         {"id", c.id},
                         {"type", "function"},
                         {"function", {{"name", c.name}, {"arguments", c.arguments}}}});
      }
    }
    d["tool_calls"] = calls;
  }
  return d;
}

json chat_chunk(const ResponseHeader& h, const json& delta, const json& finish_reason,
                const json& logprobs) {
  return {{"id", h.id},
          {"object", "chat.completion.chunk"},
          {"created", h.created},
          {"model", h.model},
          {"system_fingerprint", "herd"},
          {"choices", json::array({{{"index", 0},
                                    {"delta", delta},
                                    {"logprobs", logprobs},
                                    {"finish_reason", finish_reason}}})}};
}

json usage_chunk(const ResponseHeader& h, const engine::Finish& finish, const char* object) {
  return {{"id", h.id},       {"object", object},         {"created", h.created},
          {"model", h.model}, {"choices", json::array()}, {"usage", usage_json(finish)}};
}

json chat_completion(const ResponseHeader& h, const ParsedDelta& m, const engine::Finish& finish,
                     const json& logprobs) {
  json message = {{"role", "assistant"}};
  message["content"] = m.content.empty() && !m.tool_calls.empty() ? json(nullptr) : json(m.content);
  if (!m.reasoning.empty()) message["reasoning_content"] = m.reasoning;
  if (!m.tool_calls.empty()) message["tool_calls"] = chat_delta(m)["tool_calls"];
  return {{"id", h.id},
          {"object", "chat.completion"},
          {"created", h.created},
          {"model", h.model},
          {"system_fingerprint", "herd"},
          {"choices",
           json::array({{{"index", 0},
                         {"message", message},
                         {"logprobs", logprobs},
                         {"finish_reason", openai_finish_reason(finish, !m.tool_calls.empty())}}})},
          {"usage", usage_json(finish)}};
}

json completion_chunk(const ResponseHeader& h, const std::string& text, const json& finish_reason,
                      const json& logprobs) {
  return {{"id", h.id},
          {"object", "text_completion"},
          {"created", h.created},
          {"model", h.model},
          {"choices", json::array({{{"index", 0},
                                    {"text", text},
                                    {"logprobs", logprobs},
                                    {"finish_reason", finish_reason}}})}};
}

// A whole completion is its one chunk with the finish reason, plus the usage.
json completion(const ResponseHeader& h, const std::string& text, const engine::Finish& finish,
                const json& logprobs) {
  json out = completion_chunk(h, text, openai_finish_reason(finish, false), logprobs);
  out["usage"] = usage_json(finish);
  return out;
}

}  // namespace herd::server

#include "server/anthropic_response.h"

#include "http/anthropic_errors.h"
#include "http/bounded_json.h"
#include "server/response.h"

namespace herd::server {

using json = nlohmann::json;

json anthropic_error(const ApiError& e) {
  return {{"type", "error"},
          {"error", {{"type", http::anthropic_error_type(e.status())}, {"message", e.message()}}}};
}

std::string anthropic_event(const json& value) {
  return "event: " + value.value("type", std::string("message")) + "\n" + sse_event(value);
}

std::optional<std::string> matched_stop(const std::string& generated,
                                        const std::vector<std::string>& stops) {
  std::optional<std::string> found;
  size_t at = std::string::npos;
  for (const std::string& s : stops) {
    const size_t p = s.empty() ? std::string::npos : generated.find(s);
    if (p != std::string::npos && (at == std::string::npos || p < at)) {
      at = p;
      found = s;
    }
  }
  return found;
}

std::string anthropic_stop_reason(const engine::Finish& finish, bool has_tool_calls,
                                  const std::optional<std::string>& stop) {
  if (has_tool_calls) return "tool_use";
  if (finish.reason == engine::FinishReason::kLength) return "max_tokens";
  return stop ? "stop_sequence" : "end_turn";
}

json tool_input(const std::string& arguments) {
  json input = http::parse_bounded_json(arguments.empty() ? "{}" : arguments);
  return input.is_object() ? input : json(arguments);
}

namespace {

json stop_sequence_json(const std::optional<std::string>& stop) {
  return stop ? json(*stop) : json(nullptr);
}

}  // namespace

json anthropic_message(const AnthropicHeader& h, const ParsedDelta& reply,
                       const engine::Finish& finish, const std::optional<std::string>& stop) {
  json content = json::array();
  if (!reply.reasoning.empty()) {
    content.push_back({{"type", "thinking"}, {"thinking", reply.reasoning}, {"signature", ""}});
  }
  if (!reply.content.empty()) content.push_back({{"type", "text"}, {"text", reply.content}});
  for (const ToolCall& c : reply.tool_calls) {
    content.push_back(
        {{"type", "tool_use"}, {"id", c.id}, {"name", c.name}, {"input", tool_input(c.arguments)}});
  }
  const bool calls = !reply.tool_calls.empty();
  return {{"id", h.id},
          {"type", "message"},
          {"role", "assistant"},
          {"content", std::move(content)},
          {"model", h.model},
          {"stop_reason", anthropic_stop_reason(finish, calls, calls ? std::nullopt : stop)},
          {"stop_sequence", stop_sequence_json(calls ? std::nullopt : stop)},
          {"usage", {{"input_tokens", finish.n_prompt}, {"output_tokens", finish.n_completion}}}};
}

std::string AnthropicEvents::start() const {
  const json message = {{"id", header_.id},
                        {"type", "message"},
                        {"role", "assistant"},
                        {"content", json::array()},
                        {"model", header_.model},
                        {"stop_reason", nullptr},
                        {"stop_sequence", nullptr},
                        {"usage", {{"input_tokens", header_.input_tokens}, {"output_tokens", 0}}}};
  return anthropic_event({{"type", "message_start"}, {"message", message}}) +
         anthropic_event({{"type", "ping"}});
}

void AnthropicEvents::close(std::string& out) {
  if (open_ == Block::kNone) return;
  out += anthropic_event({{"type", "content_block_stop"}, {"index", index_}});
  open_ = Block::kNone;
}

void AnthropicEvents::open(std::string& out, Block type, json start_block) {
  if (open_ == type && type != Block::kToolUse) return;
  close(out);
  open_ = type;
  ++index_;
  out += anthropic_event({{"type", "content_block_start"},
                          {"index", index_},
                          {"content_block", std::move(start_block)}});
}

void AnthropicEvents::delta(std::string& out, json d) const {
  out += anthropic_event(
      {{"type", "content_block_delta"}, {"index", index_}, {"delta", std::move(d)}});
}

std::string AnthropicEvents::push(const ParsedDelta& d) {
  std::string out;
  if (!d.reasoning.empty()) {
    open(out, Block::kThinking, {{"type", "thinking"}, {"thinking", ""}, {"signature", ""}});
    delta(out, {{"type", "thinking_delta"}, {"thinking", d.reasoning}});
  }
  if (!d.content.empty()) {
    open(out, Block::kText, {{"type", "text"}, {"text", ""}});
    delta(out, {{"type", "text_delta"}, {"text", d.content}});
  }
  for (const ToolCall& c : d.tool_calls) {
    if (!c.id.empty()) {
      // A call's first piece: a block of its own.
      open(out, Block::kToolUse,
           {{"type", "tool_use"}, {"id", c.id}, {"name", c.name}, {"input", json::object()}});
      ++n_calls_;
    } else if (open_ != Block::kToolUse) {
      continue;  // the parser gives a call's pieces one after another, never after other output
    }
    if (!c.arguments.empty())
      delta(out, {{"type", "input_json_delta"}, {"partial_json", c.arguments}});
  }
  return out;
}

std::string AnthropicEvents::finish(const engine::Finish& f, const std::optional<std::string>& stop,
                                    const json& herd) {
  std::string out;
  close(out);
  const bool calls = n_calls_ > 0;
  json delta = {{"type", "message_delta"},
                {"delta",
                 {{"stop_reason", anthropic_stop_reason(f, calls, calls ? std::nullopt : stop)},
                  {"stop_sequence", stop_sequence_json(calls ? std::nullopt : stop)}}},
                {"usage", {{"output_tokens", f.n_completion}}}};
  if (!herd.is_null()) delta["herd"] = herd;
  out += anthropic_event(delta);
  out += anthropic_event({{"type", "message_stop"}});
  return out;
}

}  // namespace herd::server

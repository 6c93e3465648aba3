#include "server/responses_output.h"

#include <algorithm>

#include "server/responses_request.h"

namespace herd::server {
namespace {

using json = nlohmann::ordered_json;

bool all_space(std::string_view s) {
  return std::all_of(s.begin(), s.end(),
                     [](char c) { return c == ' ' || c == '\n' || c == '\t' || c == '\r'; });
}

json output_text_part(const std::string& text) {
  return {{"type", "output_text"}, {"text", text}, {"annotations", json::array()}};
}

json reasoning_text_part(const std::string& text) {
  return {{"type", "reasoning_text"}, {"text", text}};
}

}  // namespace

ResponseOutput::ResponseOutput(std::string suffix) : suffix_(std::move(suffix)) {}

std::string ResponseOutput::next_id(const char* prefix) {
  return std::string(prefix) + suffix_ + "_" + std::to_string(n_ids_++);
}

void ResponseOutput::open(Open kind, std::vector<json>& events, const ToolCall* call) {
  close("completed", events);
  const int index = static_cast<int>(items_.size());
  open_ = kind;
  text_.clear();
  if (kind == Open::kReasoning) {
    item_ = {{"id", next_id("rs_")},
             {"type", "reasoning"},
             {"summary", json::array()},
             {"content", json::array()},
             {"status", "in_progress"}};
  } else if (kind == Open::kMessage) {
    item_ = {{"id", next_id("msg_")},
             {"type", "message"},
             {"status", "in_progress"},
             {"role", "assistant"},
             {"content", json::array()}};
  } else {
    call_index_ = call->index;
    item_ = {{"id", next_id("fc_")}, {"type", "function_call"}, {"status", "in_progress"},
             {"arguments", ""},      {"call_id", call->id},     {"name", call->name}};
  }
  events.push_back(
      {{"type", "response.output_item.added"}, {"output_index", index}, {"item", item_}});
  if (kind == Open::kCall) return;
  events.push_back(
      {{"type", "response.content_part.added"},
       {"item_id", item_["id"]},
       {"output_index", index},
       {"content_index", 0},
       {"part", kind == Open::kMessage ? output_text_part("") : reasoning_text_part("")}});
}

void ResponseOutput::close(const char* status, std::vector<json>& events) {
  if (open_ == Open::kNone) return;
  const int index = static_cast<int>(items_.size());
  const json id = item_["id"];
  if (open_ == Open::kCall) {
    item_["arguments"] = text_;
    events.push_back({{"type", "response.function_call_arguments.done"},
                      {"item_id", id},
                      {"output_index", index},
                      {"arguments", text_}});
  } else {
    const bool message = open_ == Open::kMessage;
    json part = message ? output_text_part(text_) : reasoning_text_part(text_);
    json done = {{"type", message ? "response.output_text.done" : "response.reasoning_text.done"},
                 {"item_id", id},
                 {"output_index", index},
                 {"content_index", 0},
                 {"text", text_}};
    if (message) done["logprobs"] = json::array();
    events.push_back(std::move(done));
    events.push_back({{"type", "response.content_part.done"},
                      {"item_id", id},
                      {"output_index", index},
                      {"content_index", 0},
                      {"part", part}});
    item_["content"] = json::array({std::move(part)});
  }
  item_["status"] = status;
  events.push_back(
      {{"type", "response.output_item.done"}, {"output_index", index}, {"item", item_}});
  items_.push_back(std::move(item_));
  item_ = json();
  open_ = Open::kNone;
  text_.clear();
}

void ResponseOutput::add(const ParsedDelta& d, std::vector<json>& events) {
  auto text_delta = [&](const std::string& text) {
    text_ += text;
    json e = {{"type", open_ == Open::kMessage ? "response.output_text.delta"
                                               : "response.reasoning_text.delta"},
              {"item_id", item_["id"]},
              {"output_index", items_.size()},
              {"content_index", 0},
              {"delta", text}};
    if (open_ == Open::kMessage) e["logprobs"] = json::array();
    events.push_back(std::move(e));
  };
  if (!d.reasoning.empty()) {
    if (open_ != Open::kReasoning) open(Open::kReasoning, events, nullptr);
    text_delta(d.reasoning);
  }
  if (!d.content.empty()) {
    if (open_ == Open::kMessage) {
      text_delta(d.content);
    } else if (all_space(d.content)) {
      held_space_ += d.content;
    } else {
      // Whitespace before a message's text lies between items: it is dropped.
      held_space_.clear();
      open(Open::kMessage, events, nullptr);
      text_delta(d.content);
    }
  }
  for (const ToolCall& c : d.tool_calls) {
    if (open_ != Open::kCall || c.index != call_index_) open(Open::kCall, events, &c);
    if (c.arguments.empty()) continue;
    text_ += c.arguments;
    events.push_back({{"type", "response.function_call_arguments.delta"},
                      {"item_id", item_["id"]},
                      {"output_index", items_.size()},
                      {"delta", c.arguments}});
  }
}

void ResponseOutput::finish(bool incomplete, std::vector<json>& events) {
  if (open_ == Open::kNone && items_.empty()) {
    // A reply of nothing (or of whitespace) is still a message.
    open(Open::kMessage, events, nullptr);
    if (!held_space_.empty()) add({held_space_, {}, {}}, events);
  }
  held_space_.clear();
  close(incomplete ? "incomplete" : "completed", events);
}

std::string response_status(const engine::Finish& finish) {
  switch (finish.reason) {
    case engine::FinishReason::kStop:
      return "completed";
    case engine::FinishReason::kLength:
      return "incomplete";
    case engine::FinishReason::kCancelled:
      return "cancelled";
    case engine::FinishReason::kError:
      return "failed";
  }
  return "failed";
}

json responses_usage(const engine::Finish& f) {
  return {{"input_tokens", f.n_prompt},
          {"input_tokens_details", {{"cached_tokens", f.n_cached}}},
          {"output_tokens", f.n_completion},
          {"output_tokens_details", {{"reasoning_tokens", 0}}},
          {"total_tokens", f.n_prompt + f.n_completion}};
}

json response_object(const ResponsesRequest& r, const std::string& id, int64_t created_at,
                     const std::string& model, const json& output, const engine::Finish* finish) {
  const std::string status = finish ? response_status(*finish) : "in_progress";
  json incomplete = nullptr, error = nullptr;
  if (status == "incomplete") incomplete = {{"reason", "max_output_tokens"}};
  if (status == "failed") {
    error = {{"code", "server_error"}, {"message", "generation failed: " + finish->error}};
  }
  json previous = nullptr;
  if (!r.previous_response_id.empty()) previous = r.previous_response_id;
  json text = {{"format", r.text_format}};
  return {{"id", id},
          {"object", "response"},
          {"created_at", created_at},
          {"status", status},
          {"background", false},
          {"error", error},
          {"incomplete_details", incomplete},
          {"instructions", r.instructions},
          {"max_output_tokens", r.max_output_tokens},
          {"model", model},
          {"output", output},
          {"parallel_tool_calls", r.parallel_tool_calls},
          {"previous_response_id", previous},
          {"reasoning", r.reasoning},
          {"store", r.store},
          {"temperature", r.temperature},
          {"text", text},
          {"tool_choice", r.tool_choice},
          {"tools", r.tools},
          {"top_p", r.top_p},
          {"truncation", "disabled"},
          {"usage", finish ? responses_usage(*finish) : json()},
          {"user", r.user},
          {"metadata", r.metadata}};
}

std::string responses_sse(const json& event) {
  return "event: " + event.value("type", std::string()) +
         "\ndata: " + event.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace) + "\n\n";
}

}  // namespace herd::server

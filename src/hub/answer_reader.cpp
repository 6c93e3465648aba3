#include "hub/answer_reader.h"

#include <algorithm>

#include <nlohmann/json.hpp>

#include "http/bounded_json.h"

namespace herd::hub {
namespace {

using json = nlohmann::json;

constexpr size_t kMaxText = size_t{8} << 20;

// o[name] when o is an object holding it, else nullptr: a pod's answer is read field by
// field, never assuming a type.
const json* field(const json& o, const char* name) {
  if (!o.is_object()) return nullptr;
  const auto it = o.find(name);
  return it == o.end() ? nullptr : &*it;
}

const std::string* string_field(const json& o, const char* name) {
  const json* f = field(o, name);
  return f != nullptr && f->is_string() ? &f->get_ref<const std::string&>() : nullptr;
}

void read_count(const json& o, const char* name, std::optional<int64_t>& count) {
  const json* f = field(o, name);
  if (f != nullptr && f->is_number_integer()) count = f->get<int64_t>();
}

void append_text(const std::string* s, std::string& text) {
  if (s == nullptr) return;
  text.append(*s, 0, std::min(s->size(), kMaxText - std::min(kMaxText, text.size())));
}

// Takes herd's extension out of `o` (when there), keeping its ids. Whether it was there.
bool take_herd(json& o, AnswerFacts& facts, size_t max_ids) {
  if (!o.is_object() || !o.contains("herd")) return false;
  const json* ids = field(o["herd"], "completion_token_ids");
  if (ids != nullptr && ids->is_array()) {
    const size_t keep = std::min(max_ids, kMaxTokenIds) + 1;
    for (const json& t : *ids) {
      if (!t.is_number_integer()) break;
      ++facts.ids_given;
      if (facts.token_ids.size() < keep) facts.token_ids.push_back(t.get<int32_t>());
    }
  }
  o.erase("herd");
  return true;
}

// ---- one reader per API: the facts of one answer object (whole, or one event) ----

// OpenAI's: usage, finish reasons, the first choice's text (a message's content, a delta's,
// or a completion's text).
void read_openai(const json& answer, AnswerFacts& facts) {
  if (const json* u = field(answer, "usage")) {
    read_count(*u, "prompt_tokens", facts.prompt_tokens);
    read_count(*u, "completion_tokens", facts.completion_tokens);
  }
  const json* choices = field(answer, "choices");
  if (choices == nullptr || !choices->is_array() || choices->empty()) return;
  for (const json& c : *choices) {
    if (string_field(c, "finish_reason") != nullptr) facts.finished = true;
  }
  const json& first = (*choices)[0];
  const std::string* part = nullptr;
  for (const char* name : {"message", "delta"}) {
    if (const json* m = field(first, name)) {
      if (const std::string* content = string_field(*m, "content")) part = content;
    }
  }
  append_text(part != nullptr ? part : string_field(first, "text"), facts.text);
}

// Anthropic's: a whole message, or one event of a stream (message_start carries the input
// tokens, content_block_delta the text, message_delta the stop reason and output tokens).
void read_anthropic(const json& answer, AnswerFacts& facts) {
  const std::string* type = string_field(answer, "type");
  if (type == nullptr) return;
  const json* usage = field(answer, "usage");
  if (*type == "message") {
    if (const json* content = field(answer, "content"); content != nullptr && content->is_array()) {
      for (const json& block : *content) {
        const std::string* t = string_field(block, "type");
        if (t != nullptr && *t == "text") append_text(string_field(block, "text"), facts.text);
      }
    }
    if (string_field(answer, "stop_reason") != nullptr) facts.finished = true;
  } else if (*type == "message_start") {
    if (const json* message = field(answer, "message")) usage = field(*message, "usage");
  } else if (*type == "content_block_delta") {
    const json* delta = field(answer, "delta");
    const std::string* t = delta != nullptr ? string_field(*delta, "type") : nullptr;
    if (t != nullptr && *t == "text_delta") append_text(string_field(*delta, "text"), facts.text);
  } else if (*type == "message_delta") {
    const json* delta = field(answer, "delta");
    if (delta != nullptr && string_field(*delta, "stop_reason") != nullptr) facts.finished = true;
  }
  if (usage != nullptr) {
    read_count(*usage, "input_tokens", facts.prompt_tokens);
    read_count(*usage, "output_tokens", facts.completion_tokens);
  }
}

// The Responses API's response object: usage, status, and (`with_text`) its output text.
void read_response(const json& response, AnswerFacts& facts, bool with_text) {
  if (const json* u = field(response, "usage")) {
    read_count(*u, "input_tokens", facts.prompt_tokens);
    read_count(*u, "output_tokens", facts.completion_tokens);
  }
  const std::string* status = string_field(response, "status");
  if (status != nullptr && (*status == "completed" || *status == "incomplete")) {
    facts.finished = true;
  }
  const json* output = field(response, "output");
  if (!with_text || output == nullptr || !output->is_array()) return;
  for (const json& item : *output) {
    const std::string* t = string_field(item, "type");
    const json* content = field(item, "content");
    if (t == nullptr || *t != "message" || content == nullptr || !content->is_array()) continue;
    for (const json& part : *content) {
      const std::string* pt = string_field(part, "type");
      if (pt != nullptr && *pt == "output_text")
        append_text(string_field(part, "text"), facts.text);
    }
  }
}

// The Responses API's: a whole response, or one event (the text from its deltas; the
// final event's response object for usage and status). Takes herd's extension out of the
// final event's response. Whether it changed the event.
bool read_responses(json& answer, AnswerFacts& facts, size_t max_ids) {
  const std::string* object = string_field(answer, "object");
  if (object != nullptr && *object == "response") {
    read_response(answer, facts, true);
    return false;
  }
  const std::string* type = string_field(answer, "type");
  if (type == nullptr) return false;
  if (*type == "response.output_text.delta") {
    append_text(string_field(answer, "delta"), facts.text);
  } else if (*type == "response.completed" || *type == "response.incomplete") {
    if (json* response =
            answer.is_object() && answer.contains("response") ? &answer["response"] : nullptr) {
      read_response(*response, facts, false);
      return take_herd(*response, facts, max_ids);
    }
  }
  return false;
}

// Ollama's: a whole reply, or one line of a stream; the done line has the counts.
void read_ollama(const json& answer, AnswerFacts& facts) {
  if (const json* message = field(answer, "message")) {
    append_text(string_field(*message, "content"), facts.text);
  }
  append_text(string_field(answer, "response"), facts.text);
  const json* done = field(answer, "done");
  if (done == nullptr || *done != true) return;
  facts.finished = true;
  read_count(answer, "prompt_eval_count", facts.prompt_tokens);
  read_count(answer, "eval_count", facts.completion_tokens);
}

// Reads one answer object (whole, or one event) of `format`; takes herd's extension out.
// Returns whether it changed the object.
bool read_object(json& answer, AnswerFacts& facts, size_t max_ids, AnswerFormat format) {
  if (!answer.is_object()) return false;
  switch (format) {
    case AnswerFormat::kOpenAI:
      read_openai(answer, facts);
      break;
    case AnswerFormat::kAnthropic:
      read_anthropic(answer, facts);
      break;
    case AnswerFormat::kResponses:
      if (read_responses(answer, facts, max_ids)) return true;
      break;
    case AnswerFormat::kOllama:
      read_ollama(answer, facts);
      break;
  }
  return take_herd(answer, facts, max_ids);
}

}  // namespace

std::string read_answer(const std::string& body, AnswerFacts& facts, size_t max_ids,
                        AnswerFormat format) {
  // A pod is untrusted: a deep answer is passed on as it came, never parsed into a value.
  json answer = http::parse_bounded_json(body);
  if (answer.is_discarded() || !answer.is_object()) return body;
  return read_object(answer, facts, max_ids, format) ? answer.dump() : body;
}

std::string StreamReader::feed(std::string_view bytes) {
  pending_.append(bytes);
  std::string out;
  // Server-sent events end with a blank line ("\n\n"; pods write no "\r\n"); Ollama's
  // objects with a newline.
  const bool lines = format_ == AnswerFormat::kOllama;
  const std::string_view end_mark = lines ? "\n" : "\n\n";
  size_t start = 0;
  for (;;) {
    const size_t end = pending_.find(end_mark, start);
    if (end == std::string::npos) break;
    const std::string_view whole =
        std::string_view(pending_).substr(start, end + end_mark.size() - start);
    out += lines ? line(whole) : event(whole);
    start = end + end_mark.size();
  }
  pending_.erase(0, start);
  return out;
}

std::string StreamReader::flush() {
  std::string rest = std::move(pending_);
  pending_.clear();
  return rest;
}

std::string StreamReader::event(std::string_view text) {
  // The event's data line: its first line, or one after its "event:" line.
  const std::string_view prefix = "data: ";
  size_t at = text.substr(0, prefix.size()) == prefix ? 0 : text.find("\ndata: ");
  if (at == std::string_view::npos) return std::string(text);  // comments
  if (at > 0) ++at;
  const size_t from = at + prefix.size();
  const size_t to = text.find('\n', from);  // the event's end is a newline, so one is found
  json chunk = http::parse_bounded_json(text.substr(from, to - from));
  if (chunk.is_discarded() || !chunk.is_object()) return std::string(text);  // [DONE]
  const bool changed = read_object(chunk, facts_, max_ids_, format_);
  const bool usage_only = format_ == AnswerFormat::kOpenAI && chunk.contains("usage") &&
                          !chunk["usage"].is_null() && chunk.contains("choices") &&
                          chunk["choices"].is_array() && chunk["choices"].empty();
  if (usage_only && !keep_usage_) return "";  // the hub asked for it, not the client
  if (!changed) return std::string(text);
  return std::string(text.substr(0, from)) + chunk.dump() + std::string(text.substr(to));
}

std::string StreamReader::line(std::string_view text) {
  json object = http::parse_bounded_json(text.substr(0, text.size() - 1));
  if (object.is_discarded() || !object.is_object()) return std::string(text);
  if (!read_object(object, facts_, max_ids_, format_)) return std::string(text);
  return object.dump() + "\n";
}

}  // namespace herd::hub

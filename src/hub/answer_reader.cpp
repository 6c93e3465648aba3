#include "hub/answer_reader.h"

#include <algorithm>

#include <nlohmann/json.hpp>

#include "http/bounded_json.h"

namespace herd::hub {
namespace {

using json = nlohmann::json;

constexpr size_t kMaxText = size_t{8} << 20;

// Appends a choice's text: a whole message's content, a delta's, or a completion's text.
void read_text(const json& choice, std::string& text) {
  if (!choice.is_object()) return;
  const json* part = nullptr;
  for (const char* field : {"message", "delta"}) {
    const auto it = choice.find(field);
    if (it != choice.end() && it->is_object()) {
      const auto content = it->find("content");
      if (content != it->end() && content->is_string()) part = &*content;
    }
  }
  const auto plain = choice.find("text");
  if (part == nullptr && plain != choice.end() && plain->is_string()) part = &*plain;
  if (part == nullptr) return;
  const std::string& s = part->get_ref<const std::string&>();
  text.append(s, 0, std::min(s.size(), kMaxText - std::min(kMaxText, text.size())));
}

// Reads usage, finish and token ids from one answer object; takes herd's extension out.
// Returns whether it changed the object.
bool read_object(json& answer, AnswerFacts& facts, size_t max_ids) {
  if (!answer.is_object()) return false;
  if (answer.contains("usage") && answer["usage"].is_object()) {
    const json& u = answer["usage"];
    if (u.contains("prompt_tokens") && u["prompt_tokens"].is_number_integer()) {
      facts.prompt_tokens = u["prompt_tokens"].get<int64_t>();
    }
    if (u.contains("completion_tokens") && u["completion_tokens"].is_number_integer()) {
      facts.completion_tokens = u["completion_tokens"].get<int64_t>();
    }
  }
  if (answer.contains("choices") && answer["choices"].is_array()) {
    for (const json& c : answer["choices"]) {
      if (c.is_object() && c.contains("finish_reason") && c["finish_reason"].is_string()) {
        facts.finished = true;
      }
    }
    if (!answer["choices"].empty()) read_text(answer["choices"][0], facts.text);
  }
  if (!answer.contains("herd")) return false;
  const json& herd = answer["herd"];
  if (herd.is_object() && herd.contains("completion_token_ids") &&
      herd["completion_token_ids"].is_array()) {
    const size_t keep = std::min(max_ids, kMaxTokenIds) + 1;
    for (const json& t : herd["completion_token_ids"]) {
      if (!t.is_number_integer()) break;
      ++facts.ids_given;
      if (facts.token_ids.size() < keep) facts.token_ids.push_back(t.get<int32_t>());
    }
  }
  answer.erase("herd");
  return true;
}

}  // namespace

std::string read_answer(const std::string& body, AnswerFacts& facts, size_t max_ids) {
  // A pod is untrusted: a deep answer is passed on as it came, never parsed into a value.
  json answer = http::parse_bounded_json(body);
  if (answer.is_discarded() || !answer.is_object()) return body;
  return read_object(answer, facts, max_ids) ? answer.dump() : body;
}

std::string StreamReader::feed(std::string_view bytes) {
  pending_.append(bytes);
  std::string out;
  for (;;) {
    // Events end with a blank line ("\n\n"; pods write no "\r\n").
    const size_t end = pending_.find("\n\n");
    if (end == std::string::npos) break;
    out += event(std::string_view(pending_).substr(0, end + 2));
    pending_.erase(0, end + 2);
  }
  return out;
}

std::string StreamReader::flush() {
  std::string rest = std::move(pending_);
  pending_.clear();
  return rest;
}

std::string StreamReader::event(std::string_view text) {
  const std::string_view prefix = "data: ";
  if (text.substr(0, prefix.size()) != prefix) return std::string(text);  // comments
  const std::string_view data = text.substr(prefix.size(), text.size() - prefix.size() - 2);
  json chunk = http::parse_bounded_json(data);
  if (chunk.is_discarded() || !chunk.is_object()) return std::string(text);  // [DONE]
  const bool changed = read_object(chunk, facts_, max_ids_);
  const bool usage_only = chunk.contains("usage") && !chunk["usage"].is_null() &&
                          chunk.contains("choices") && chunk["choices"].is_array() &&
                          chunk["choices"].empty();
  if (usage_only && !keep_usage_) return "";  // the hub asked for it, not the client
  if (!changed) return std::string(text);
  return "data: " + chunk.dump() + "\n\n";
}

}  // namespace herd::hub

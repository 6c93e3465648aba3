// Ollama's generation endpoints: POST /api/chat and /api/generate (ollama_api.h).
#include "server/ollama_api.h"

#include <httplib.h>

#include <ctime>

#include "http/bounded_json.h"
#include "server/chat_run.h"
#include "server/ollama_request.h"
#include "server/response.h"
#include "server/served_model.h"

namespace herd::server {
namespace {

using json = nlohmann::json;
using SystemClock = std::chrono::system_clock;

std::string ndjson_line(const json& value) {
  return json_text(value) + "\n";
}

// The final object: the reply's calls (chat; Ollama sends a call whole, not in pieces), the
// reason and the counts.
// `herd`: herd's extension (response.h), added when not null.
json final_reply(bool chat, const std::string& model, const ParsedDelta& rest,
                 const engine::Finish& finish, Clock::time_point start, const json& herd) {
  json out = ollama_reply(chat, model, rest, true);
  out["done_reason"] = ollama_done_reason(finish);
  add_ollama_timings(out, finish, Clock::now() - start);
  if (!herd.is_null()) out["herd"] = herd;
  return out;
}

// The streamed state of one reply.
struct OllamaStream {
  OutputParser parser;
  bool chat = true;
  std::string model;
  Clock::time_point start;
  std::vector<ToolCall> calls{};  // pieces so far, joined (written whole with the last object)
  bool token_ids = false;         // herd's extension: the final object carries the ids
};

// Runs a prepared request: the whole reply as one object, or NDJSON as it comes.
// `sampling`: the request's stream, model and herd_token_ids.
void reply(const httplib::Request& req, httplib::Response& res, Serving& s, ChatRun run, bool chat,
           const SamplingRequest& sampling, Clock::time_point start, const char* prompt_param) {
  const bool streamed = sampling.stream, token_ids = sampling.herd_token_ids;
  const std::string& model = sampling.model;
  auto in_flight = s.in_flight();
  std::shared_ptr<engine::RequestStream> stream =
      s.submit(std::move(run.params), run.grammar, prompt_param);
  if (!streamed) {
    Collected c = collect(*stream, req);
    if (c.finish.reason == engine::FinishReason::kError) throw generation_error(c.finish);
    // Appended to an empty delta, a call's pieces join into the whole call.
    OutputParser parser(run.parser);
    ParsedDelta all;
    all.append(parser.push(c.text));
    all.append(parser.finish());
    send_json(res, 200,
              final_reply(chat, model, all, c.finish, start,
                          token_ids ? herd_extension(c.tokens) : json()));
    return;
  }
  auto state = std::make_shared<OllamaStream>(OllamaStream{.parser = OutputParser(run.parser),
                                                           .chat = chat,
                                                           .model = model,
                                                           .start = start,
                                                           .token_ids = token_ids});
  ReplyStream reply{.stream = stream, .in_flight = std::move(in_flight), .keep_tokens = token_ids};
  // NDJSON has no comment line: an idle stream writes nothing.
  stream_reply(
      res, "application/x-ndjson", std::move(reply), "",
      [state](const engine::StreamUpdate& u, const std::vector<int32_t>& tokens, std::string& out) {
        auto add = [&](ParsedDelta d) {
          ParsedDelta joined;
          joined.tool_calls = std::move(state->calls);
          joined.append({{}, {}, std::move(d.tool_calls)});
          state->calls = std::move(joined.tool_calls);
          d.tool_calls.clear();
          if (!d.empty()) out += ndjson_line(ollama_reply(state->chat, state->model, d, false));
        };
        if (!u.text.empty()) add(state->parser.push(u.text));
        if (!u.finish) return;
        if (u.finish->reason == engine::FinishReason::kError) {
          out += ndjson_line({{"error", generation_error(*u.finish).message()}});
          return;
        }
        add(state->parser.finish());
        ParsedDelta rest;
        rest.tool_calls = std::move(state->calls);
        const json herd = state->token_ids ? herd_extension(tokens) : json();
        out += ndjson_line(
            final_reply(state->chat, state->model, rest, *u.finish, state->start, herd));
      });
}

// Ollama's answer to a request that only loads the model (no messages, an empty prompt).
void answer_load(httplib::Response& res, bool chat, const std::string& model) {
  json out = ollama_reply(chat, model, {}, true);
  out["done_reason"] = "load";
  send_json(res, 200, out);
}

}  // namespace

void write_ollama_error(httplib::Response& res, const ApiError& e) {
  send_json(res, e.status(), {{"error", e.message()}});
  if (e.status() == 503) res.set_header("Retry-After", "1");
}

std::string ollama_time(SystemClock::time_point t) {
  const auto since = t.time_since_epoch();
  const std::time_t seconds = std::chrono::duration_cast<std::chrono::seconds>(since).count();
  const auto micros =
      std::chrono::duration_cast<std::chrono::microseconds>(since).count() % 1000000;
  std::tm tm{};
  gmtime_r(&seconds, &tm);
  char text[64];
  const size_t n = std::strftime(text, sizeof text, "%Y-%m-%dT%H:%M:%S", &tm);
  std::snprintf(text + n, sizeof text - n, ".%06lldZ", static_cast<long long>(micros));
  return text;
}

const char* ollama_done_reason(const engine::Finish& finish) {
  return finish.reason == engine::FinishReason::kLength ? "length" : "stop";
}

json ollama_tool_calls(const std::vector<ToolCall>& calls) {
  json out = json::array();
  for (const ToolCall& c : calls) {
    json arguments = http::parse_bounded_json(c.arguments);
    if (!arguments.is_object()) arguments = c.arguments;
    out.push_back({{"id", c.id},
                   {"function",
                    {{"index", c.index}, {"name", c.name}, {"arguments", std::move(arguments)}}}});
  }
  return out;
}

void add_ollama_timings(json& out, const engine::Finish& finish, std::chrono::nanoseconds total) {
  auto ns = [](double seconds) { return static_cast<int64_t>(seconds * 1e9); };
  out["total_duration"] = static_cast<int64_t>(total.count());
  out["load_duration"] = 0;
  out["prompt_eval_count"] = finish.n_prompt;
  out["prompt_eval_duration"] = ns(finish.prefill_seconds);
  out["eval_count"] = finish.n_completion;
  out["eval_duration"] = ns(finish.decode_seconds);
}

json ollama_reply(bool chat, const std::string& model, const ParsedDelta& delta, bool done) {
  json out = {{"model", model}, {"created_at", ollama_time(SystemClock::now())}};
  if (chat) {
    json message = {{"role", "assistant"}, {"content", delta.content}};
    if (!delta.reasoning.empty()) message["thinking"] = delta.reasoning;
    if (!delta.tool_calls.empty()) message["tool_calls"] = ollama_tool_calls(delta.tool_calls);
    out["message"] = std::move(message);
  } else {
    out["response"] = delta.content;
    if (!delta.reasoning.empty()) out["thinking"] = delta.reasoning;
  }
  out["done"] = done;
  return out;
}

void ollama_chat(const httplib::Request& req, httplib::Response& res, Serving& s) {
  const Clock::time_point start = Clock::now();
  const ServedModel& m = s.model();
  OllamaChatRequest r = parse_ollama_chat(req.body);
  check_ollama_model(r.chat.sampling.model, m.id);
  if (r.load_only) return answer_load(res, true, r.chat.sampling.model);
  ChatRun run = prepare_chat(m, r.chat, s.next_id());
  reply(req, res, s, std::move(run), true, r.chat.sampling, start, "messages");
}

ChatRun prepare_ollama_generate(const ServedModel& m, const OllamaGenerateRequest& r, uint64_t n) {
  if (r.raw || !m.chat_template) {
    // The prompt as is, the model's BOS before it (a model without a chat template is
    // prompted so too, the system prompt before the prompt).
    CompletionRequest c;
    c.sampling = r.sampling;
    c.prompt_text = r.system.empty() || r.raw ? r.prompt : r.system + "\n\n" + r.prompt;
    c.response_format = r.format;
    return prepare_completion(m, c);
  }
  ChatRequest c;
  c.sampling = r.sampling;
  c.messages = nlohmann::ordered_json::array();
  if (!r.system.empty()) c.messages.push_back({{"role", "system"}, {"content", r.system}});
  c.messages.push_back({{"role", "user"}, {"content", r.prompt}});
  c.template_kwargs = r.template_kwargs;
  c.response_format = r.format;
  return prepare_chat(m, c, n);
}

void ollama_generate(const httplib::Request& req, httplib::Response& res, Serving& s) {
  const Clock::time_point start = Clock::now();
  const ServedModel& m = s.model();
  OllamaGenerateRequest r = parse_ollama_generate(req.body);
  check_ollama_model(r.sampling.model, m.id);
  if (r.load_only) return answer_load(res, false, r.sampling.model);
  ChatRun run = prepare_ollama_generate(m, r, s.next_id());
  reply(req, res, s, std::move(run), false, r.sampling, start, "prompt");
}

}  // namespace herd::server

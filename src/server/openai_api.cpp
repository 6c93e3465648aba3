// OpenAI's API: POST /v1/chat/completions and /v1/completions, streamed as server-sent
// events or not (request.h parses, response.h writes the JSON).
#include "server/openai_api.h"

#include <httplib.h>

#include "server/chat_run.h"
#include "server/response.h"
#include "server/served_model.h"

namespace herd::server {
namespace {

using json = nlohmann::json;

// Ends a stream: a failed generation's error event, or else the final chunk that `last`
// builds (called only then) and, when `usage_object` is given, the usage chunk; then [DONE].
void finish_events(std::string& out, const engine::Finish& finish,
                   const std::function<json()>& last, const ResponseHeader& header,
                   const char* usage_object) {
  if (finish.reason == engine::FinishReason::kError) {
    out += sse_event(generation_error(finish).to_json());
  } else {
    const json chunk = last();
    out += sse_event(chunk);
    if (usage_object != nullptr) out += sse_event(usage_chunk(header, finish, usage_object));
  }
  out += sse_done();
}

// The streamed state of one chat response.
struct ChatStream {
  OutputParser parser;
  ResponseHeader header;
  const tokenizer::Tokenizer* tokenizer = nullptr;
  bool include_usage = false;
  bool logprobs = false;
  bool sent_role = false;
  bool token_ids = false;  // herd's extension: the final chunk carries them
};

}  // namespace

void openai_chat_completions(const httplib::Request& req, httplib::Response& res, Serving& s) {
  const ServedModel& m = s.model();
  ChatRequest r = parse_chat_request(req.body);
  check_model(r.sampling.model, m);
  const uint64_t n = s.next_id();
  auto [g, grammar, po] = prepare_chat(m, r, n);
  auto in_flight = s.in_flight();
  std::shared_ptr<engine::RequestStream> stream = s.submit(std::move(g), grammar, "messages");
  ResponseHeader header{"chatcmpl-" + std::to_string(n), unix_now(), m.id};

  if (!r.sampling.stream) {
    Collected c = collect(*stream, req);
    if (c.finish.reason == engine::FinishReason::kError) throw generation_error(c.finish);
    OutputParser parser(po);
    ParsedDelta all = parser.push(c.text);
    all.append(parser.finish());
    const json lp = r.sampling.top_logprobs >= 0 ? logprobs_json(*m.tokenizer, c.logprobs) : json();
    json answer = chat_completion(header, all, c.finish, lp);
    if (r.sampling.herd_token_ids) answer["herd"] = herd_extension(c.tokens);
    send_json(res, 200, answer);
    return;
  }

  auto state = std::make_shared<ChatStream>(ChatStream{.parser = OutputParser(po),
                                                       .header = header,
                                                       .tokenizer = m.tokenizer,
                                                       .include_usage = r.sampling.include_usage,
                                                       .logprobs = r.sampling.top_logprobs >= 0,
                                                       .token_ids = r.sampling.herd_token_ids});
  ReplyStream reply{.stream = stream,
                    .in_flight = std::move(in_flight),
                    .keep_tokens = r.sampling.herd_token_ids};
  stream_reply(
      res, "text/event-stream", std::move(reply), kSseKeepAlive,
      [state](const engine::StreamUpdate& u, const std::vector<int32_t>& tokens, std::string& out) {
        if (!state->sent_role) {
          state->sent_role = true;
          out += sse_event(chat_chunk(state->header, {{"role", "assistant"}, {"content", ""}},
                                      nullptr, nullptr));
        }
        auto add_delta = [&](const ParsedDelta& d, const json& logprobs) {
          if (d.empty() && logprobs.is_null()) return;
          out += sse_event(chat_chunk(state->header, chat_delta(d), nullptr, logprobs));
        };
        if (!u.text.empty() || !u.tokens.empty()) {
          json lp;
          if (state->logprobs && !u.logprobs.empty()) {
            lp = logprobs_json(*state->tokenizer, u.logprobs);
          }
          add_delta(state->parser.push(u.text), lp);
        }
        if (!u.finish) return;
        auto last = [&] {
          add_delta(state->parser.finish(), json());
          json chunk = chat_chunk(state->header, json::object(),
                                  openai_finish_reason(*u.finish, state->parser.n_tool_calls() > 0),
                                  nullptr);
          if (state->token_ids) chunk["herd"] = herd_extension(tokens);
          return chunk;
        };
        finish_events(out, *u.finish, last, state->header,
                      state->include_usage ? "chat.completion.chunk" : nullptr);
      });
}

void openai_completions(const httplib::Request& req, httplib::Response& res, Serving& s) {
  const ServedModel& m = s.model();
  CompletionRequest r = parse_completion_request(req.body);
  check_model(r.sampling.model, m);
  auto [g, grammar, po] = prepare_completion(m, r);
  auto in_flight = s.in_flight();
  std::shared_ptr<engine::RequestStream> stream = s.submit(std::move(g), grammar, "prompt");
  ResponseHeader header{"cmpl-" + std::to_string(s.next_id()), unix_now(), m.id};

  if (!r.sampling.stream) {
    Collected c = collect(*stream, req);
    if (c.finish.reason == engine::FinishReason::kError) throw generation_error(c.finish);
    json lp;
    if (r.sampling.top_logprobs >= 0) lp = completion_logprobs_json(*m.tokenizer, c.logprobs, 0);
    json answer = completion(header, c.text, c.finish, lp);
    if (r.sampling.herd_token_ids) answer["herd"] = herd_extension(c.tokens);
    send_json(res, 200, answer);
    return;
  }
  // The streamed state of one completion.
  struct CompletionStream {
    ResponseHeader header;
    const tokenizer::Tokenizer* tokenizer = nullptr;
    bool logprobs = false;
    int64_t text_offset = 0;
    bool include_usage = false;
    bool token_ids = false;
  };
  auto state =
      std::make_shared<CompletionStream>(CompletionStream{.header = header,
                                                          .tokenizer = m.tokenizer,
                                                          .logprobs = r.sampling.top_logprobs >= 0,
                                                          .include_usage = r.sampling.include_usage,
                                                          .token_ids = r.sampling.herd_token_ids});
  ReplyStream reply{.stream = stream,
                    .in_flight = std::move(in_flight),
                    .keep_tokens = r.sampling.herd_token_ids};
  stream_reply(
      res, "text/event-stream", std::move(reply), kSseKeepAlive,
      [state](const engine::StreamUpdate& u, const std::vector<int32_t>& tokens, std::string& out) {
        if (!u.text.empty() || (state->logprobs && !u.logprobs.empty())) {
          json lp;
          if (state->logprobs) {
            lp = completion_logprobs_json(*state->tokenizer, u.logprobs, state->text_offset);
          }
          out += sse_event(completion_chunk(state->header, u.text, nullptr, lp));
          state->text_offset += static_cast<int64_t>(u.text.size());
        }
        if (!u.finish) return;
        auto last = [&] {
          json chunk =
              completion_chunk(state->header, "", openai_finish_reason(*u.finish, false), nullptr);
          if (state->token_ids) chunk["herd"] = herd_extension(tokens);
          return chunk;
        };
        finish_events(out, *u.finish, last, state->header,
                      state->include_usage ? "text_completion" : nullptr);
      });
}

}  // namespace herd::server

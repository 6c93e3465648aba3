#include "server/anthropic_api.h"

#include <httplib.h>

#include "server/anthropic_request.h"
#include "server/anthropic_response.h"
#include "server/chat_run.h"
#include "server/response.h"
#include "server/served_model.h"
#include "tokenizer/stream_decoder.h"

namespace herd::server {
namespace {

using json = nlohmann::json;

// What Anthropic's API sends to keep an idle stream open; its clients skip it.
constexpr std::string_view kPing = "event: ping\ndata: {\"type\": \"ping\"}\n\n";

// The stop sequence the generation ended at, from its tokens (the text has it cut).
std::optional<std::string> stop_of(const engine::Finish& finish, const std::vector<int32_t>& tokens,
                                   const ServedModel& m, bool render_special,
                                   const std::vector<std::string>& stops) {
  if (finish.reason != engine::FinishReason::kStop || stops.empty()) return std::nullopt;
  // Decoded as the engine decoded them (bytes that form no character are U+FFFD there), so
  // that a stop string taken from an earlier reply is found.
  tokenizer::StreamDecoder decoder(*m.tokenizer, render_special);
  std::string text;
  for (const int32_t t : tokens) text += decoder.push(t);
  text += decoder.flush();
  return matched_stop(text, stops);
}

// The streamed state of one response (its ReplyStream keeps the tokens when there are stop
// sequences to tell or herd's extension to send).
struct MessageStream {
  OutputParser parser;
  AnthropicEvents events;
  const ServedModel* model = nullptr;
  bool render_special = false;
  std::vector<std::string> stops;
  bool token_ids = false;  // herd's extension: message_delta carries the tokens' ids
  bool started = false;
};

}  // namespace

ChatRun prepare_anthropic(const ServedModel& m, AnthropicRequest& a, uint64_t n) {
  check_model(a.chat.sampling.model, m);
  if (a.thinking && m.template_source.find("enable_thinking") != std::string::npos) {
    a.chat.template_kwargs["enable_thinking"] = *a.thinking;
  }
  ChatRun run = prepare_chat(m, a.chat, n);
  // Kimi K2's and Mistral Small 3.2's call ids are the templates' own (tool_call_id()).
  if (run.parser.tools != ToolFormat::kKimi && run.parser.tools != ToolFormat::kMistralCallId) {
    run.parser.id_prefix = "toolu_" + std::to_string(n) + "_";
  }
  if (!a.prefill.empty()) {
    const std::vector<int32_t> more = m.tokenizer->encode(a.prefill, false, false);
    run.params.prompt.insert(run.params.prompt.end(), more.begin(), more.end());
  }
  return run;
}

void write_anthropic_error(httplib::Response& res, const ApiError& e) {
  send_json(res, e.status(), anthropic_error(e));
  if (e.status() == 503) res.set_header("Retry-After", "1");
}

void anthropic_count_tokens(const httplib::Request& req, httplib::Response& res, Serving& s) {
  AnthropicRequest a = parse_anthropic_request(req.body, AnthropicEndpoint::kCountTokens);
  const ChatRun run = prepare_anthropic(s.model(), a, s.next_id());
  send_json(res, 200, {{"input_tokens", run.params.prompt.size()}});
}

void anthropic_messages(const httplib::Request& req, httplib::Response& res, Serving& s) {
  const ServedModel& m = s.model();
  AnthropicRequest a = parse_anthropic_request(req.body, AnthropicEndpoint::kMessages);
  const uint64_t n = s.next_id();
  auto [g, grammar, po] = prepare_anthropic(m, a, n);
  const AnthropicHeader header{"msg_" + std::to_string(n), m.id,
                               static_cast<int64_t>(g.prompt.size())};
  const bool render_special = g.render_special;
  auto in_flight = s.in_flight();
  std::shared_ptr<engine::RequestStream> stream = s.submit(std::move(g), grammar, "messages");
  const std::vector<std::string>& stops = a.chat.sampling.stop;

  if (!a.chat.sampling.stream) {
    Collected c = collect(*stream, req);
    if (c.finish.reason == engine::FinishReason::kError) throw generation_error(c.finish);
    OutputParser parser(po);
    ParsedDelta all = parser.push(c.text);
    all.append(parser.finish());
    const auto stop = stop_of(c.finish, c.tokens, m, render_special, stops);
    json answer = anthropic_message(header, all, c.finish, stop);
    if (a.chat.sampling.herd_token_ids) answer["herd"] = herd_extension(c.tokens);
    send_json(res, 200, answer);
    return;
  }

  auto state = std::make_shared<MessageStream>(MessageStream{
      .parser = OutputParser(po),
      .events = AnthropicEvents(header),
      .model = &m,
      .render_special = render_special,
      .stops = stops,
      .token_ids = a.chat.sampling.herd_token_ids,
  });
  ReplyStream reply{.stream = stream,
                    .in_flight = std::move(in_flight),
                    .keep_tokens = !state->stops.empty() || state->token_ids};
  stream_reply(
      res, "text/event-stream", std::move(reply), kPing,
      [state](const engine::StreamUpdate& u, const std::vector<int32_t>& tokens, std::string& out) {
        if (!state->started) {
          state->started = true;
          out += state->events.start();
        }
        if (!u.text.empty()) out += state->events.push(state->parser.push(u.text));
        if (!u.finish) return;
        if (u.finish->reason == engine::FinishReason::kError) {
          // Anthropic's clients read an error event as the stream's failure.
          out += anthropic_event(anthropic_error(generation_error(*u.finish)));
          return;
        }
        out += state->events.push(state->parser.finish());
        const json herd = state->token_ids ? herd_extension(tokens) : json();
        out += state->events.finish(
            *u.finish,
            stop_of(*u.finish, tokens, *state->model, state->render_special, state->stops), herd);
      });
}

}  // namespace herd::server

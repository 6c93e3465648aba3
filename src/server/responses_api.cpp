#include "server/responses_api.h"

#include <httplib.h>

#include <cstdio>
#include <random>

#include "server/chat_run.h"
#include "server/response.h"
#include "server/responses_output.h"
#include "server/responses_request.h"
#include "server/responses_stored.h"
#include "server/served_model.h"

namespace herd::server {
namespace {

using json = nlohmann::ordered_json;

// What a response's ids end with: the server's count and 64 random bits, so that a stored
// response cannot be read by guessing its id.
std::string id_suffix(uint64_t n) {
  std::random_device device;
  const uint64_t r = (uint64_t{device()} << 32) ^ device();
  char text[40];
  std::snprintf(text, sizeof text, "%llx%016llx", static_cast<unsigned long long>(n),
                static_cast<unsigned long long>(r));
  return text;
}

// The chat codec's errors name its "messages"; here they are the request's "input".
[[noreturn]] void rethrow_naming_input(const ApiError& e) {
  const nlohmann::json error = e.to_json()["error"];
  if (error["param"] != "messages") throw e;
  throw ApiError(e.status(), e.message(), error["type"].get<std::string>(), "input",
                 error["code"].is_string() ? error["code"].get<std::string>() : "");
}

void send(httplib::Response& res, const json& body) {
  res.status = 200;
  res.set_content(body.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace),
                  "application/json");
}

// The streamed state of one response.
struct ResponsesStream {
  OutputParser parser;
  ResponseOutput output;
  std::shared_ptr<const ResponsesRequest> request;
  std::string id;
  int64_t created_at = 0;
  std::string model;
  json input;  // the items given to this response (kept when stored)
  std::shared_ptr<ResponseStore> store;
  int64_t sequence = 0;
  bool started = false;

  void add_events(std::vector<json>& events, std::string& out) {
    for (json& e : events) {
      e["sequence_number"] = sequence++;
      out += responses_sse(e);
    }
    events.clear();
  }
};

// Ends a stream: the open item done, then response.completed (or .incomplete), or for a
// failed generation an error event and response.failed. `tokens`: the reply's (kept when
// herd's extension was asked).
void finish_stream(ResponsesStream& s, const engine::Finish& finish,
                   const std::vector<int32_t>& tokens, std::string& out) {
  std::vector<json> events;
  s.output.add(s.parser.finish(), events);
  s.output.finish(finish.reason != engine::FinishReason::kStop, events);
  const std::string status = response_status(finish);
  if (finish.reason == engine::FinishReason::kError) {
    const ApiError e = generation_error(finish);
    events.push_back({{"type", "error"},
                      {"code", "generation_failed"},
                      {"message", e.message()},
                      {"param", nullptr}});
  }
  json response =
      response_object(*s.request, s.id, s.created_at, s.model, s.output.items(), &finish);
  if (s.request->chat.sampling.herd_token_ids && finish.reason != engine::FinishReason::kError) {
    response["herd"] = herd_extension(tokens);
  }
  const char* type = status == "completed"    ? "response.completed"
                     : status == "incomplete" ? "response.incomplete"
                                              : "response.failed";
  events.push_back({{"type", type}, {"response", response}});
  s.add_events(events, out);
  if (s.request->store && finish.reason != engine::FinishReason::kError) {
    s.store->put(s.id, {std::move(response), std::move(s.input)});
  }
}

void create_response(const httplib::Request& req, httplib::Response& res, Serving& s,
                     const std::shared_ptr<ResponseStore>& store) {
  const ServedModel& m = s.model();
  auto r = std::make_shared<ResponsesRequest>(parse_responses_request(req.body));
  check_model(r->chat.sampling.model, m);
  const uint64_t n = s.next_id();
  const std::string suffix = id_suffix(n);
  // The items given to this response: the conversation it goes on from, then its input, with
  // ids (kept when stored, so that GET .../input_items can page by them).
  json input = json::array();
  if (!r->previous_response_id.empty()) {
    std::optional<StoredResponse> previous = store->get(r->previous_response_id);
    if (!previous) {
      throw response_not_kept(r->previous_response_id, "previous_response_id",
                              "previous_response_not_found");
    }
    input = stored_conversation(*previous);
  }
  for (json& item : input_items_with_ids(r->input, suffix)) input.push_back(std::move(item));
  r->chat.messages = responses_messages(r->instructions, input);
  if (r->chat.messages.empty()) {
    throw ApiError(400, "'input' holds no message", "invalid_request_error", "input");
  }
  ChatRun run;
  try {
    run = prepare_chat(m, r->chat, n);
  } catch (const ApiError& e) {
    rethrow_naming_input(e);
  }
  auto in_flight = s.in_flight();
  std::shared_ptr<engine::RequestStream> stream =
      s.submit(std::move(run.params), run.grammar, "input");
  const std::string id = "resp_" + suffix;
  const int64_t created_at = unix_now();

  if (!r->chat.sampling.stream) {
    Collected c = collect(*stream, req);
    if (c.finish.reason == engine::FinishReason::kError) throw generation_error(c.finish);
    OutputParser parser(run.parser);
    ResponseOutput output(suffix);
    std::vector<json> events;  // unused: the whole reply is one object
    output.add(parser.push(c.text), events);
    output.add(parser.finish(), events);
    output.finish(c.finish.reason != engine::FinishReason::kStop, events);
    json answer = response_object(*r, id, created_at, m.id, output.items(), &c.finish);
    if (r->chat.sampling.herd_token_ids) answer["herd"] = herd_extension(c.tokens);
    send(res, answer);
    if (r->store) store->put(id, {std::move(answer), std::move(input)});
    return;
  }

  auto state = std::make_shared<ResponsesStream>(ResponsesStream{.parser = OutputParser(run.parser),
                                                                 .output = ResponseOutput(suffix),
                                                                 .request = r,
                                                                 .id = id,
                                                                 .created_at = created_at,
                                                                 .model = m.id,
                                                                 .input = std::move(input),
                                                                 .store = store});
  ReplyStream reply{.stream = stream,
                    .in_flight = std::move(in_flight),
                    .keep_tokens = r->chat.sampling.herd_token_ids};
  stream_reply(
      res, "text/event-stream", std::move(reply), kSseKeepAlive,
      [state](const engine::StreamUpdate& u, const std::vector<int32_t>& tokens, std::string& out) {
        std::vector<json> events;
        if (!state->started) {
          state->started = true;
          const json response = response_object(*state->request, state->id, state->created_at,
                                                state->model, json::array(), nullptr);
          events.push_back({{"type", "response.created"}, {"response", response}});
          events.push_back({{"type", "response.in_progress"}, {"response", response}});
        }
        if (!u.text.empty()) state->output.add(state->parser.push(u.text), events);
        state->add_events(events, out);
        if (u.finish) finish_stream(*state, *u.finish, tokens, out);
      });
}

}  // namespace

Endpoint responses_endpoint(std::shared_ptr<ResponseStore> store) {
  return [store = std::move(store)](const httplib::Request& req, httplib::Response& res,
                                    Serving& s) { create_response(req, res, s, store); };
}

}  // namespace herd::server

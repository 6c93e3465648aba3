// What every generation endpoint shares, whatever API it speaks (OpenAI's, Ollama's,
// Anthropic's): the model and scheduler it serves with, submitting a request, reading its
// stream to the end or writing it as it comes, and the client going away. An API is a codec
// over engine::GenerationParams and the scheduler's RequestStream: it parses its request into
// a ChatRun (chat_run.h), submits it through a Serving, and writes the stream in its shape.
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "engine/request_stream.h"
#include "engine/scheduler.h"
#include "server/json_schema.h"
#include "server/request.h"

namespace httplib {
struct Request;
struct Response;
class DataSink;
}  // namespace httplib

namespace herd::server {

struct ServedModel;
class HttpServer;

using Clock = std::chrono::steady_clock;

// How long a streaming provider waits for the engine before it looks at the client again.
constexpr auto kWaitSlice = std::chrono::milliseconds(250);
// An idle stream (queued behind others) writes a keep-alive this often, so that a client that
// went away is noticed: the write fails.
constexpr auto kKeepAlive = std::chrono::seconds(2);
// The keep-alive of server-sent events: a comment line, which clients skip.
constexpr std::string_view kSseKeepAlive = ": keep-alive\n\n";

// Counts a response being written until it is done, however it ends (the server's drain and
// model swap wait for the count to reach 0).
class InFlight {
 public:
  explicit InFlight(std::atomic<int64_t>& n) : n_(&n) { n_->fetch_add(1); }
  ~InFlight() { n_->fetch_sub(1); }
  InFlight(const InFlight&) = delete;
  InFlight& operator=(const InFlight&) = delete;

 private:
  std::atomic<int64_t>* n_;
};

// A request's whole output (non-streaming responses).
struct Collected {
  std::string text;
  std::vector<int32_t> tokens;
  std::vector<engine::TokenLogprob> logprobs;
  std::vector<engine::TokenScore> scores;
  engine::Finish finish;
};

// Reads a stream to its end. A client that goes away meanwhile has its request cancelled,
// which frees the slot at the next step (as streams do when a write fails).
Collected collect(engine::RequestStream& stream, const httplib::Request& req);

// The error a failed generation reports (500, "generation_failed").
ApiError generation_error(const engine::Finish& finish);

int64_t unix_now();

// Writes `body` as the response's JSON with `status`.
void send_json(httplib::Response& res, int status, const nlohmann::json& body);

// What every streamed response holds, whatever its API: the request's stream, the server's
// count of responses being written (released when the response ends), when it last wrote,
// and the tokens so far when the API needs them (stop sequences, herd's extension).
struct ReplyStream {
  std::shared_ptr<engine::RequestStream> stream;
  std::unique_ptr<InFlight> in_flight;
  bool keep_tokens = false;
  std::vector<int32_t> tokens{};  // generated so far (when keep_tokens)
  Clock::time_point last_write = Clock::now();
};

// Turns one update of the engine into an API's bytes, appended to `out`; `tokens` are the
// tokens so far, this update's included (when kept). The update with a finish is the last:
// the step writes its API's ending then.
using StreamStep = std::function<void(const engine::StreamUpdate& update,
                                      const std::vector<int32_t>& tokens, std::string& out)>;

// Answers 200 with a body of `content_type` streamed as it comes: each call of the provider
// waits up to kWaitSlice for the engine and writes what `step` makes of the update, or after
// kKeepAlive of silence `keep_alive` (an SSE comment; empty: none, for formats that have no
// such line); the last update's bytes end the body. A failed write or a cut response
// cancels the request, which frees its slot.
void stream_reply(httplib::Response& res, const char* content_type, ReplyStream reply,
                  std::string_view keep_alive, StreamStep step);

// Serves one request with the model and scheduler a handler took as it started (held until
// the handler returns; a streaming response's provider keeps an in_flight() until its last
// byte). Made by HttpServer for each generation request.
class Serving {
 public:
  const ServedModel& model() const { return *model_; }
  engine::Scheduler& scheduler() const { return *scheduler_; }
  // A number for the response's ids, unique on this server.
  uint64_t next_id();
  // Counts a streamed response as being written until the returned object is destroyed.
  std::unique_ptr<InFlight> in_flight();
  // Queues a request, its reply held to `grammar` when one is given (its token tables built
  // here, on the HTTP thread). Throws ApiError: 503 when draining or the queue is full, 400
  // naming `prompt_param` when the prompt does not fit.
  std::shared_ptr<engine::RequestStream> submit(engine::GenerationParams params,
                                                std::shared_ptr<const JsonGrammar> grammar,
                                                const char* prompt_param);

 private:
  friend class HttpServer;
  Serving(HttpServer& server, const ServedModel& model, engine::Scheduler& scheduler)
      : server_(&server), model_(&model), scheduler_(&scheduler) {}
  HttpServer* server_;
  const ServedModel* model_;
  engine::Scheduler* scheduler_;
};

// A generation endpoint: reads the request, answers through `res` (a body, or a streaming
// provider). Throws ApiError for what the client got wrong; the route writes it in the API's
// error shape.
using Endpoint = std::function<void(const httplib::Request&, httplib::Response&, Serving&)>;
// Writes an ApiError in an API's error shape.
using ErrorWriter = void (*)(httplib::Response&, const ApiError&);

// OpenAI's: {"error": {"message", "type", "param", "code"}}, Retry-After on 503.
void write_openai_error(httplib::Response& res, const ApiError& e);

}  // namespace herd::server

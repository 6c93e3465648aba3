// Ollama's API on herd serve (docs/server.md, "Ollama's API"): POST /api/chat and
// /api/generate, streamed as NDJSON (one JSON object a line, Ollama's default) or not, and
// the model listing Ollama's clients read (/api/tags, /api/show, /api/ps, /api/version).
// Requests are parsed by ollama_request.h into the ChatRequest every API renders through the
// model's chat template (chat_run.h). Errors are Ollama's {"error": "message"}.
#pragma once

#include <chrono>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "engine/request_stream.h"
#include "server/chat_run.h"
#include "server/ollama_request.h"
#include "server/output_parser.h"
#include "server/serving.h"

namespace httplib {
struct Request;
struct Response;
}  // namespace httplib
namespace herd::http {
class GuardedServer;
}

namespace herd::server {

struct ServedModel;

// A generate request rendered for the model: raw (or for a model without a chat template)
// the prompt as is, else the system prompt and the prompt through the chat template.
// POST /api/verify renders a served request so too.
ChatRun prepare_ollama_generate(const ServedModel& m, const OllamaGenerateRequest& r, uint64_t n);

// Generation endpoints (HttpServer::generation routes them).
void ollama_chat(const httplib::Request& req, httplib::Response& res, Serving& s);
void ollama_generate(const httplib::Request& req, httplib::Response& res, Serving& s);
// POST /api/show {"model": NAME}: details, GGUF metadata, template, capabilities.
void ollama_show(const httplib::Request& req, httplib::Response& res, Serving& s);

// Ollama's error shape: {"error": message}, with the status (Retry-After on 503).
void write_ollama_error(httplib::Response& res, const ApiError& e);

// GET /api/tags and /api/ps: the served model (none while loading).
nlohmann::json ollama_tags(const ServedModel* m);
nlohmann::json ollama_ps(const ServedModel* m);
// GET /api/version.
nlohmann::json ollama_version();
// What herd does not do (embeddings, creating or pulling models): 501 with `message`.
void ollama_not_supported(httplib::Response& res, const std::string& message);
// Routes Ollama's endpoints that herd serve does not do to 501s saying so: /api/embed,
// /api/embeddings, /api/pull (naming `herd pull`), /api/push, /api/create, /api/copy,
// /api/delete.
void add_ollama_unsupported_routes(http::GuardedServer& http);

// ---- the JSON of responses (exposed for tests) ----

// Ollama's timestamps: RFC 3339 in UTC with microseconds, "2026-12-07T02:12:34.123456Z".
std::string ollama_time(std::chrono::system_clock::time_point t);
// The name Ollama's clients list a model as: "id:latest" (or the id, when it has a tag).
std::string ollama_name(const std::string& id);
// "stop" or "length".
const char* ollama_done_reason(const engine::Finish& finish);
// A reply's whole calls as Ollama writes them: [{"id", "function": {"index", "name",
// "arguments": {...}}}]; arguments that are not a JSON object stay the model's text.
nlohmann::json ollama_tool_calls(const std::vector<ToolCall>& calls);
// The final object's counts and times (nanoseconds): total_duration (`total`),
// load_duration (0: the model is loaded when the server starts), prompt_eval_count and
// _duration (the prompt's prefill), eval_count and _duration (the generated tokens).
void add_ollama_timings(nlohmann::json& out, const engine::Finish& finish,
                        std::chrono::nanoseconds total);
// One object of a reply: chat's {"model", "created_at", "message": {"role", "content",
// "thinking"?, "tool_calls"?}, "done"} or generate's {"model", "created_at", "response",
// "thinking"?, "done"}; `delta` is what it carries.
nlohmann::json ollama_reply(bool chat, const std::string& model, const ParsedDelta& delta,
                            bool done);

}  // namespace herd::server

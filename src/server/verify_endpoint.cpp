// POST /api/verify: a hub asks this pod to check tokens another pod served (docs/network.md).
#include <httplib.h>

#include <climits>

#include "http/bounded_json.h"
#include "server/chat_run.h"
#include "server/openai_api.h"
#include "server/response.h"
#include "server/served_model.h"
#include "server/verify_render.h"
#include "server/verify_request.h"

namespace herd::server {

using json = nlohmann::json;

// The body:
//   {"endpoint": "chat" | "completions" | "messages" | "responses" | "ollama_chat" |
//                 "ollama_generate" (verify_request.h), "request": <the client's request body>,
//    "completion_token_ids": [the served tokens]}
// answers
//   {"prompt_tokens": n, "temperature": t (0: greedy), "text": the served tokens as text,
//    "content": the text an honest pod sends for them (verify_render.h),
//    "scores": [{"token": id, "probability": p, "gap": g, "entropy": h, "variance": v}, ...]}
// with each token's probability and gap as this pod's sampler would draw it with the
// request's sampling (engine::DrawCheck), all from one prefill of prompt and served tokens;
// or {"unscorable": why, "text": ...} for ids no honest pod serves (a failed check).
// The prompt is this pod's own rendering and tokenization of the request, not the server's.
// Requests held to a grammar (JSON schema, forced tool calls) cannot be checked this way: 422.

void herd_verify(const httplib::Request& req, httplib::Response& res, Serving& s) {
  const ServedModel& m = s.model();
  std::string problem;
  const json body = http::parse_bounded_json(req.body, &problem);
  if (body.is_discarded()) throw ApiError(400, "the body: " + problem, "invalid_request_error");
  if (!body.is_object()) {
    throw ApiError(400, "the body is not a JSON object", "invalid_request_error");
  }
  const std::string endpoint = body.value("endpoint", "");
  if (!body.contains("request") || !body["request"].is_object()) {
    throw ApiError(400, "'request' must be the served request's body", "invalid_request_error",
                   "request");
  }
  if (!body.contains("completion_token_ids") || !body["completion_token_ids"].is_array() ||
      body["completion_token_ids"].empty()) {
    throw ApiError(400, "'completion_token_ids' must be a non-empty array of token ids",
                   "invalid_request_error", "completion_token_ids");
  }
  std::vector<int32_t> served;
  for (const json& t : body["completion_token_ids"]) {
    if (!t.is_number_integer() || t.get<int64_t>() < INT32_MIN || t.get<int64_t>() > INT32_MAX) {
      throw ApiError(400, "'completion_token_ids' holds " + t.dump(0).substr(0, 40) + ", not an id",
                     "invalid_request_error", "completion_token_ids");
    }
    served.push_back(t.get<int32_t>());
  }
  const std::string request = body["request"].dump();
  auto [run, parser] = verify_run(endpoint, request, m);
  if (run.grammar) {
    throw ApiError(422,
                   "a request held to a grammar (a JSON schema, a forced tool call) cannot "
                   "be checked token by token",
                   "invalid_request_error", "request", "unverifiable");
  }
  engine::GenerationParams& g = run.params;
  const auto n_prompt = static_cast<int64_t>(g.prompt.size());
  const std::string why = unscorable(
      ServedIds{&served, m.tokenizer->n_vocab(), g.max_tokens, n_prompt, s.scheduler().n_ctx()});
  if (!why.empty()) return send_json(res, 200, {{"unscorable", why}});
  const float temperature = g.sampler.temperature;
  const std::string content = rendered_text(*m.tokenizer, g.render_special, g.stop, parser, served);
  g.score_from = n_prompt;
  g.prompt.insert(g.prompt.end(), served.begin(), served.end());
  g.max_tokens = 0;
  auto in_flight = s.in_flight();
  std::shared_ptr<engine::RequestStream> stream = s.submit(std::move(g), nullptr, "request");
  Collected c = collect(*stream, req);
  if (c.finish.reason == engine::FinishReason::kError) throw generation_error(c.finish);
  if (c.scores.size() != served.size()) {
    throw ApiError(500,
                   "the check scored " + std::to_string(c.scores.size()) + " of " +
                       std::to_string(served.size()) + " tokens",
                   "server_error");
  }
  send_json(res, 200,
            {{"prompt_tokens", n_prompt},
             {"temperature", temperature},
             {"text", m.tokenizer->decode(served)},
             {"content", content},
             {"scores", scores_json(c.scores)}});
}

}  // namespace herd::server

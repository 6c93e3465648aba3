// The JSON of OpenAI API responses and server-sent events: chat completions and their
// streamed chunks, text completions, usage, logprobs.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "engine/scheduler.h"
#include "server/output_parser.h"
#include "tokenizer/tokenizer.h"

namespace herd::server {

// One server-sent event: "data: <json>\n\n". Invalid UTF-8 is replaced, never thrown on.
std::string sse_event(const nlohmann::json& value);
// The end of an OpenAI stream: "data: [DONE]\n\n".
std::string sse_done();
// A JSON body as text, invalid UTF-8 replaced.
std::string json_text(const nlohmann::json& value);

// herd's extension of an answer for a hub (docs/network.md), in every API's answer when
// the request asks with "herd_token_ids": true: {"completion_token_ids": [the generated
// tokens' ids]}, the value of the answer's (or its final event's) top-level "herd".
nlohmann::json herd_extension(const std::vector<int32_t>& tokens);

// What every response of one request repeats.
struct ResponseHeader {
  std::string id;       // "chatcmpl-..." or "cmpl-..."
  int64_t created = 0;  // Unix seconds
  std::string model;
};

nlohmann::json usage_json(const engine::Finish& finish);
// {"content": [{"token", "logprob", "bytes", "top_logprobs": [...]}]}
nlohmann::json logprobs_json(const tokenizer::Tokenizer& tokenizer,
                             const std::vector<engine::TokenLogprob>& logprobs);
// The legacy completions shape: {"tokens", "token_logprobs", "top_logprobs": [{token: lp}],
// "text_offset"}; offsets count from text_offset0.
nlohmann::json completion_logprobs_json(const tokenizer::Tokenizer& tokenizer,
                                        const std::vector<engine::TokenLogprob>& logprobs,
                                        int64_t text_offset0);
// "stop", "length" or "tool_calls" (when the reply holds tool calls).
std::string openai_finish_reason(const engine::Finish& finish, bool has_tool_calls);

// The delta of a chat chunk for what the parser produced: a tool call's first piece with its
// index, id, type and name, later pieces with the index and more arguments text, as OpenAI
// streams them. For a whole reply (ParsedDelta::append of every delta) each call is whole.
nlohmann::json chat_delta(const ParsedDelta& delta);
nlohmann::json chat_chunk(const ResponseHeader& header, const nlohmann::json& delta,
                          const nlohmann::json& finish_reason, const nlohmann::json& logprobs);
// The final chunk of include_usage: no choices, the usage.
nlohmann::json usage_chunk(const ResponseHeader& header, const engine::Finish& finish,
                           const char* object);
nlohmann::json chat_completion(const ResponseHeader& header, const ParsedDelta& message,
                               const engine::Finish& finish, const nlohmann::json& logprobs);

nlohmann::json completion_chunk(const ResponseHeader& header, const std::string& text,
                                const nlohmann::json& finish_reason,
                                const nlohmann::json& logprobs);
nlohmann::json completion(const ResponseHeader& header, const std::string& text,
                          const engine::Finish& finish, const nlohmann::json& logprobs);

}  // namespace herd::server

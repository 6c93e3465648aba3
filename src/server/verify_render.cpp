#include "server/verify_render.h"

#include "engine/stop_matcher.h"
#include "tokenizer/stream_decoder.h"

namespace herd::server {

std::string unscorable(const ServedIds& s) {
  const auto n = static_cast<int64_t>(s.ids->size());
  for (size_t i = 0; i < s.ids->size(); ++i) {
    const int32_t id = (*s.ids)[i];
    if (id < 0 || id >= s.n_vocab) {
      return "id " + std::to_string(id) + " (token " + std::to_string(i) +
             ") is not of this model's vocabulary [0, " + std::to_string(s.n_vocab) + ")";
    }
  }
  if (s.max_tokens >= 0 && n > s.max_tokens) {
    return std::to_string(n) + " ids for a request of max_tokens " + std::to_string(s.max_tokens);
  }
  // The scheduler generates while the context has room: prompt + ids at most n_ctx.
  if (s.n_ctx > 0 && s.n_prompt + n > s.n_ctx) {
    return std::to_string(n) + " ids after a prompt of " + std::to_string(s.n_prompt) +
           " tokens: beyond the context of " + std::to_string(s.n_ctx);
  }
  return "";
}

std::string rendered_text(const tokenizer::Tokenizer& tokenizer, bool render_special,
                          const std::vector<std::string>& stops,
                          const std::optional<OutputParserOptions>& parser,
                          const std::vector<int32_t>& ids) {
  // As the scheduler does (Scheduler::sample_and_emit, finish): each id through the
  // decoder and the stop matcher; what they hold at the end belongs to the text.
  tokenizer::StreamDecoder decoder(tokenizer, render_special);
  engine::StopMatcher matcher(stops);
  std::string text;
  for (int32_t id : ids) {
    if (matcher.stopped()) break;
    text += matcher.push(decoder.push(id));
  }
  if (!matcher.stopped()) text += matcher.push(decoder.flush());
  text += matcher.flush();
  if (!parser) return text;
  OutputParser p(*parser);
  ParsedDelta all = p.push(text);
  all.append(p.finish());
  return all.content;
}

nlohmann::json scores_json(const std::vector<engine::TokenScore>& scores) {
  nlohmann::json out = nlohmann::json::array();
  for (const engine::TokenScore& t : scores) {
    out.push_back({{"token", t.token},
                   {"probability", t.check.probability},
                   {"gap", t.check.gap},
                   {"entropy", t.check.entropy},
                   {"variance", t.check.variance}});
  }
  return out;
}

}  // namespace herd::server

// POST /api/verify replays a request of every API the pods serve (verify_request.h): each
// codec's request renders the same prompt as the same conversation in OpenAI's chat, with
// its own bound on the answer's tokens.
#include "server/verify_request.h"

#include <gtest/gtest.h>

#include "server/request.h"
#include "server/served_model.h"
#include "server/tiny_vocabulary_test_util.h"

namespace herd::server {
namespace {

using json = nlohmann::json;

// A served model: a tiny synthetic vocabulary and a ChatML template.
const ServedModel& model() {
  static const ServedModel m = [] {
    ServedModel s;
    s.id = "tiny";
    s.tokenizer = &tiny_vocabulary();
    s.template_source =
        "{% for m in messages %}<|im_start|>{{ m.role }}\n{{ m.content }}<|im_end|>\n"
        "{% endfor %}{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}";
    s.chat_template = chat::Template::parse(s.template_source);
    return s;
  }();
  return m;
}

VerifyRun run_of(const std::string& endpoint, const json& request) {
  return verify_run(endpoint, request.dump(), model());
}

const json kMessages = json::array({{{"role", "user"}, {"content", "hi there"}}});

TEST(VerifyRequestTest, EachApisRequestRendersTheSamePromptAsOpenAIsChat) {
  const VerifyRun chat = run_of("chat", {{"model", "tiny"}, {"messages", kMessages}});
  ASSERT_FALSE(chat.run.params.prompt.empty());
  ASSERT_TRUE(chat.parser.has_value());
  const struct {
    const char* endpoint;
    json request;
    int64_t max_tokens;
  } cases[] = {
      {"messages", {{"model", "tiny"}, {"max_tokens", 16}, {"messages", kMessages}}, 16},
      {"responses", {{"model", "tiny"}, {"max_output_tokens", 17}, {"input", "hi there"}}, 17},
      {"ollama_chat",
       {{"model", "tiny:latest"}, {"options", {{"num_predict", 18}}}, {"messages", kMessages}},
       18},
      {"ollama_generate",
       {{"model", "tiny"}, {"options", {{"num_predict", 19}}}, {"prompt", "hi there"}},
       19},
  };
  for (const auto& c : cases) {
    SCOPED_TRACE(c.endpoint);
    const VerifyRun v = run_of(c.endpoint, c.request);
    EXPECT_EQ(v.run.params.prompt, chat.run.params.prompt);
    EXPECT_EQ(v.run.params.max_tokens, c.max_tokens);
    EXPECT_TRUE(v.parser.has_value());  // the answer's text is the parsed message content
    EXPECT_FALSE(v.run.grammar);
  }
  // Ollama's raw prompt is a plain completion's.
  const VerifyRun raw =
      run_of("ollama_generate", {{"model", "tiny"}, {"prompt", "hi there"}, {"raw", true}});
  EXPECT_EQ(raw.run.params.prompt,
            run_of("completions", {{"model", "tiny"}, {"prompt", "hi there"}}).run.params.prompt);
  EXPECT_FALSE(raw.parser.has_value());
  // Anthropic's prefill ends the prompt: more tokens than the question alone.
  json prefilled = {{"model", "tiny"}, {"max_tokens", 16}, {"messages", kMessages}};
  prefilled["messages"].push_back({{"role", "assistant"}, {"content", "Sure"}});
  EXPECT_GT(run_of("messages", prefilled).run.params.prompt.size(), chat.run.params.prompt.size());
}

TEST(VerifyRequestTest, RequestsThatCannotBeReplayedAreClearErrors) {
  auto status_of = [](const std::string& endpoint, const json& request) {
    try {
      run_of(endpoint, request);
    } catch (const ApiError& e) {
      return std::make_pair(e.status(), std::string(e.message()));
    }
    return std::make_pair(200, std::string());
  };
  auto [status, message] = status_of("other", {{"model", "tiny"}});
  EXPECT_EQ(status, 400);
  EXPECT_NE(message.find("ollama_generate"), std::string::npos) << message;
  std::tie(status, message) =
      status_of("responses", {{"model", "tiny"}, {"input", "hi"}, {"previous_response_id", "r"}});
  EXPECT_EQ(status, 400);
  EXPECT_NE(message.find("previous_response_id"), std::string::npos) << message;
  std::tie(status, message) =
      status_of("messages", {{"model", "other"}, {"max_tokens", 4}, {"messages", kMessages}});
  EXPECT_EQ(status, 404);
  std::tie(status, message) =
      status_of("ollama_chat", {{"model", "other"}, {"messages", kMessages}});
  EXPECT_EQ(status, 404);
  std::tie(status, message) = status_of("messages", {{"model", "tiny"}, {"messages", kMessages}});
  EXPECT_EQ(status, 400);  // Anthropic's max_tokens is required
  std::tie(status, message) = status_of("ollama_generate", {{"model", "tiny"}, {"prompt", ""}});
  EXPECT_EQ(status, 400);  // loading the model: nothing was generated
}

}  // namespace
}  // namespace herd::server

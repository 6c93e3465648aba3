// A synthesized model's tokenizer and chat template work end to end: text round-trips
// through the built-in vocabulary, special tokens parse, and the template renders a
// conversation (with tools and reasoning) into text that tokenizes back to the ChatML
// control tokens.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "chat/template.h"
#include "gguf/reader.h"
#include "model/synth.h"
#include "tokenizer/stream_decoder.h"
#include "tokenizer/tokenizer.h"

namespace herd {
namespace {

std::string synth_model(const std::string& name, const std::string& vocab = "") {
  SynthOptions o;
  o.arch = "qwen3";
  o.n_embd = 64;
  o.n_layer = 1;
  o.n_head = 2;
  o.type = "q8_0";
  o.vocab_path = vocab;
  o.out_path = ::testing::TempDir() + "/" + name;
  synthesize(o);
  return o.out_path;
}

TEST(SynthRoundTrip, BuiltinVocabularyRoundTripsText) {
  gguf::File f = gguf::File::open(synth_model("roundtrip_builtin.gguf"));
  auto tok = tokenizer::Tokenizer::from_gguf(f);
  for (const std::string text :
       {"Hello world", "The herd runs large language models.", "  two  spaces\n\ttab",
        "Ünïcödé and 日本語 and 🦙", "code: for (int i = 0; i < n; ++i) {}", ""}) {
    std::vector<int32_t> ids = tok.encode(text, false, false);
    EXPECT_EQ(tok.decode(ids), text);
    // Streaming gives the same text, one complete character at a time.
    tokenizer::StreamDecoder stream(tok);
    std::string streamed;
    for (int32_t id : ids) streamed += stream.push(id);
    streamed += stream.flush();
    EXPECT_EQ(streamed, text);
  }
  // Learned merges make common words single tokens.
  EXPECT_LT(tok.encode(" the", false, false).size(), 2u);
  // ChatML control tokens parse as one id each.
  std::vector<int32_t> ids = tok.encode("<|im_start|>user\nhi<|im_end|>", false, true);
  EXPECT_EQ(ids.front(), *tok.bos() + 1);
  EXPECT_EQ(ids.back(), *tok.eos());
  EXPECT_TRUE(tok.is_eog(*tok.eos()));
}

TEST(SynthRoundTrip, BuiltinTemplateRendersChat) {
  gguf::File f = gguf::File::open(synth_model("roundtrip_template.gguf"));
  auto tmpl = chat::Template::parse(std::string(f.get_string("tokenizer.chat_template")));
  auto messages = nlohmann::ordered_json::parse(R"([
    {"role": "system", "content": "Be brief."},
    {"role": "user", "content": "Weather in Paris?"},
    {"role": "assistant", "content": "", "reasoning_content": "Need the tool.",
     "tool_calls": [{"type": "function", "function": {"name": "get_weather", "arguments": {"city": "Paris"}}}]},
    {"role": "tool", "content": "sunny"},
    {"role": "assistant", "content": "Sunny."}
  ])");
  auto tools = nlohmann::ordered_json::parse(
      R"([{"type": "function", "function": {"name": "get_weather", "parameters": {}}}])");
  std::string text = tmpl.render(chat::chat_variables(
      messages, &tools, true, std::nullopt, "<|im_end|>", nlohmann::ordered_json::object()));
  EXPECT_EQ(text.rfind("<|im_start|>system\nBe brief.\n\n# Tools", 0), 0u) << text;
  EXPECT_NE(
      text.find(R"({"type": "function", "function": {"name": "get_weather", "parameters": {}}})"),
      std::string::npos)
      << text;
  EXPECT_NE(text.find("<think>\nNeed the tool.\n</think>\n\n"), std::string::npos) << text;
  EXPECT_NE(text.find(R"(<tool_call>
{"name": "get_weather", "arguments": {"city": "Paris"}}
</tool_call>)"),
            std::string::npos)
      << text;
  EXPECT_NE(text.find("<|im_start|>user\n<tool_response>\nsunny\n</tool_response><|im_end|>\n"),
            std::string::npos)
      << text;
  EXPECT_TRUE(text.ends_with("<|im_start|>assistant\nSunny.<|im_end|>\n<|im_start|>assistant\n"))
      << text;

  std::string no_think = tmpl.render(chat::chat_variables(
      nlohmann::ordered_json::parse(R"([{"role": "user", "content": "hi"}])"), nullptr, true,
      std::nullopt, std::nullopt, {{"enable_thinking", false}}));
  EXPECT_EQ(no_think,
            "<|im_start|>user\nhi<|im_end|>\n<|im_start|>assistant\n<think>\n\n</think>\n\n");

  EXPECT_THROW(tmpl.render(chat::chat_variables(
                   nlohmann::ordered_json::parse(R"([{"role": "robot", "content": "x"}])"), nullptr,
                   false, std::nullopt, std::nullopt, nlohmann::ordered_json::object())),
               chat::TemplateRaised);

  // The rendering tokenizes back into the template's control tokens.
  auto tok = tokenizer::Tokenizer::from_gguf(f);
  std::vector<int32_t> ids = tok.encode(text, false, true);
  EXPECT_EQ(tok.decode(ids, /*render_special=*/true), text);
}

TEST(SynthRoundTrip, VocabularyFromFileWorksInSynthModel) {
  gguf::File f = gguf::File::open(
      synth_model("roundtrip_spm.gguf", "../shared/vocab/ggml-vocab-llama-spm.gguf"));
  auto tok = tokenizer::Tokenizer::from_gguf(f);
  EXPECT_EQ(tok.encode("Hello world", true, false), (std::vector<int32_t>{1, 15043, 3186}));
}

}  // namespace
}  // namespace herd

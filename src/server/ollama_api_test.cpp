// The JSON of Ollama's responses: timestamps, reply objects, tool calls, counts, model names
// and the facts /api/tags lists.
#include "server/ollama_api.h"

#include <gtest/gtest.h>
#include <httplib.h>

#include <filesystem>

#include "gguf/reader.h"
#include "gguf/split.h"
#include "model/synth_test_util.h"
#include "server/model_facts.h"
#include "server/served_model.h"

namespace herd::server {
namespace {

using json = nlohmann::json;

TEST(OllamaApi, TimesAreRfc3339InUtc) {
  const auto t = std::chrono::system_clock::time_point(std::chrono::microseconds(1700000000123456));
  EXPECT_EQ(ollama_time(t), "2023-11-14T22:13:20.123456Z");
  EXPECT_EQ(ollama_time(std::chrono::system_clock::time_point()), "1970-01-01T00:00:00.000000Z");
}

TEST(OllamaApi, ChatAndGenerateReplies) {
  ParsedDelta d;
  d.content = "Hi";
  d.reasoning = "hm";
  const json chat = ollama_reply(true, "m:latest", d, false);
  EXPECT_EQ(chat["model"], "m:latest");
  EXPECT_EQ(chat["message"], json({{"role", "assistant"}, {"content", "Hi"}, {"thinking", "hm"}}));
  EXPECT_EQ(chat["done"], false);
  EXPECT_TRUE(chat["created_at"].is_string());
  const json gen = ollama_reply(false, "m", d, true);
  EXPECT_EQ(gen["response"], "Hi");
  EXPECT_EQ(gen["thinking"], "hm");
  EXPECT_EQ(gen["done"], true);
  EXPECT_FALSE(gen.contains("message"));
  // Nothing to say: content "" and no thinking.
  const json empty = ollama_reply(true, "m", {}, true);
  EXPECT_EQ(empty["message"], json({{"role", "assistant"}, {"content", ""}}));
}

TEST(OllamaApi, ToolCallArgumentsAreObjects) {
  const std::vector<ToolCall> calls = {{"call_1_0", "get_weather", R"({"city":"Oslo"})", 0},
                                       {"call_1_1", "broken", R"({"city":)", 1}};
  const json out = ollama_tool_calls(calls);
  ASSERT_EQ(out.size(), 2u);
  EXPECT_EQ(out[0]["id"], "call_1_0");
  EXPECT_EQ(out[0]["function"],
            json({{"index", 0}, {"name", "get_weather"}, {"arguments", {{"city", "Oslo"}}}}));
  // Text that is not a JSON object is returned as the model wrote it.
  EXPECT_EQ(out[1]["function"]["arguments"], R"({"city":)");
  ParsedDelta d;
  d.tool_calls = calls;
  EXPECT_EQ(ollama_reply(true, "m", d, true)["message"]["tool_calls"], out);
}

TEST(OllamaApi, CountsAndTimesInNanoseconds) {
  engine::Finish f;
  f.reason = engine::FinishReason::kLength;
  f.n_prompt = 12;
  f.n_completion = 5;
  f.prefill_seconds = 0.25;
  f.decode_seconds = 1.5;
  json out;
  add_ollama_timings(out, f, std::chrono::milliseconds(2000));
  EXPECT_EQ(out["total_duration"], 2000000000);
  EXPECT_EQ(out["load_duration"], 0);
  EXPECT_EQ(out["prompt_eval_count"], 12);
  EXPECT_EQ(out["prompt_eval_duration"], 250000000);
  EXPECT_EQ(out["eval_count"], 5);
  EXPECT_EQ(out["eval_duration"], 1500000000);
  EXPECT_STREQ(ollama_done_reason(f), "length");
  f.reason = engine::FinishReason::kStop;
  EXPECT_STREQ(ollama_done_reason(f), "stop");
}

TEST(OllamaApi, ErrorsAreOllamasShape) {
  httplib::Response res;
  write_ollama_error(res, ApiError(404, "model 'x' not found", "invalid_request_error", "model"));
  EXPECT_EQ(res.status, 404);
  EXPECT_EQ(json::parse(res.body), json({{"error", "model 'x' not found"}}));
  write_ollama_error(res, ApiError(503, "busy", "server_error"));
  EXPECT_EQ(res.get_header_value("Retry-After"), "1");
  httplib::Response none;
  ollama_not_supported(none, "herd has no embeddings");
  EXPECT_EQ(none.status, 501);
  EXPECT_EQ(json::parse(none.body)["error"], "herd has no embeddings");
}

TEST(OllamaApi, ModelListing) {
  EXPECT_EQ(ollama_name("qwen3"), "qwen3:latest");
  EXPECT_EQ(ollama_name("qwen3:8b"), "qwen3:8b");
  EXPECT_EQ(ollama_tags(nullptr), json({{"models", json::array()}}));
  EXPECT_EQ(ollama_ps(nullptr), json({{"models", json::array()}}));
  ServedModel m;
  m.id = "tiny";
  m.facts.family = "qwen3";
  m.facts.parameters = 494030000;
  m.facts.quantization = "Q4_0";
  m.facts.size_bytes = 1234;
  m.facts.digest = "ab";
  m.node_info = {{"n_ctx", 4096}, {"device_bytes", 99}};
  const json tags = ollama_tags(&m);
  ASSERT_EQ(tags["models"].size(), 1u);
  const json& e = tags["models"][0];
  EXPECT_EQ(e["name"], "tiny:latest");
  EXPECT_EQ(e["model"], "tiny:latest");
  EXPECT_EQ(e["size"], 1234);
  EXPECT_EQ(e["digest"], "ab");
  EXPECT_EQ(e["details"]["format"], "gguf");
  EXPECT_EQ(e["details"]["family"], "qwen3");
  EXPECT_EQ(e["details"]["parameter_size"], "494.03M");
  EXPECT_EQ(e["details"]["quantization_level"], "Q4_0");
  const json ps = ollama_ps(&m)["models"][0];
  EXPECT_EQ(ps["size_vram"], 99);
  EXPECT_EQ(ps["context_length"], 4096);
  EXPECT_TRUE(ps["expires_at"].is_string());
  EXPECT_TRUE(ollama_version()["version"].is_string());
}

TEST(OllamaApi, FactsNames) {
  EXPECT_EQ(file_type_name(15), "Q4_K_M");
  EXPECT_EQ(file_type_name(2), "Q4_0");
  EXPECT_EQ(file_type_name(32), "BF16");
  EXPECT_EQ(file_type_name(4), "unknown");
  EXPECT_EQ(file_type_name(1000), "unknown");
  EXPECT_EQ(parameter_size(8030261248), "8.0B");
  EXPECT_EQ(parameter_size(1500), "1.50K");
  EXPECT_EQ(parameter_size(12), "12");
}

TEST(OllamaApi, FactsOfAFile) {
  const SynthOptions o = synth_testing::small("qwen3", "q4_0", "ollama_facts.gguf");
  synthesize(o);
  const gguf::File file = gguf::File::open(o.out_path);
  const ModelFacts f = read_model_facts(file);
  EXPECT_EQ(f.family, "qwen3");
  EXPECT_EQ(f.quantization, "Q4_0");
  int64_t parameters = 0;
  for (const gguf::TensorInfo& t : file.tensors()) parameters += t.n_elements;
  EXPECT_EQ(f.parameters, parameters);
  EXPECT_GT(f.parameters, 0);
  EXPECT_EQ(f.size_bytes, file.bytes().size());
  EXPECT_GT(f.modified_unix, 0);
  EXPECT_EQ(f.digest.size(), 64u);
  EXPECT_EQ(f.metadata["general.architecture"], "qwen3");
  EXPECT_TRUE(f.metadata.contains("tokenizer.ggml.tokens"));
  EXPECT_TRUE(f.metadata["tokenizer.ggml.tokens"].is_null());  // arrays left out
  // The same bytes from memory: no size or time, the rest the same.
  const gguf::File parsed = gguf::File::parse(file.bytes(), o.out_path + ".missing");
  const ModelFacts g = read_model_facts(parsed);
  EXPECT_EQ(g.size_bytes, 0u);
  EXPECT_EQ(g.modified_unix, 0);
  EXPECT_EQ(g.digest, f.digest);
}

TEST(OllamaApi, FactsOfASplitModel) {
  const SynthOptions o = synth_testing::small("qwen3", "q4_0", "ollama_facts_split.gguf");
  synthesize(o);
  const gguf::File whole = gguf::File::open(o.out_path);
  const std::string prefix = o.out_path.substr(0, o.out_path.size() - 5);
  const std::vector<std::string> paths = gguf::write_split(whole, prefix, 3);
  const gguf::File split = gguf::File::open(paths[1]);
  const ModelFacts f = read_model_facts(split);
  const ModelFacts w = read_model_facts(whole);
  EXPECT_EQ(f.parameters, w.parameters);
  EXPECT_EQ(f.quantization, w.quantization);
  uint64_t size = 0;
  for (const std::string& path : paths) size += std::filesystem::file_size(path);
  EXPECT_EQ(f.size_bytes, size);
  EXPECT_GT(f.size_bytes, w.size_bytes);  // three headers
  EXPECT_EQ(f.digest.size(), 64u);
  EXPECT_NE(f.digest, w.digest);
  EXPECT_FALSE(f.metadata.contains("split.count"));
  for (const std::string& path : paths) std::filesystem::remove(path);
}

}  // namespace
}  // namespace herd::server

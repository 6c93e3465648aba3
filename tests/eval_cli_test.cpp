// `herd eval` end to end: the CLI writes logits in the format of ../shared/models, equal to
// the reference within the model's tolerance; bad input fails with exit code 1.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdlib>
#include <cstring>
#include <sstream>

#include <sys/wait.h>

#include "util/mapped_file.h"

namespace {

int run(const std::string& args) {
  const std::string command = std::string(HERD_BIN) + " " + args + " 2>/dev/null";
  const int status = std::system(command.c_str());
  return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

std::vector<float> floats(const std::string& path) {
  std::string bytes = herd::read_file(path);
  std::vector<float> out(bytes.size() / sizeof(float));
  std::memcpy(out.data(), bytes.data(), out.size() * sizeof(float));
  return out;
}

TEST(EvalCli, WritesReferenceFormat) {
  std::string ids = herd::read_file("../shared/models/qwen3-f16.1.tokens");
  while (!ids.empty() && (ids.back() == '\n' || ids.back() == ' ')) ids.pop_back();
  for (char& c : ids) {
    if (c == ' ') c = ',';
  }
  const std::string out = ::testing::TempDir() + "/eval_cli.f32";
  ASSERT_EQ(run("eval --model ../shared/models/qwen3-f16.gguf --tokens " + ids + " --dump-logits " +
                out + " --threads 2 --batch 7"),
            0);
  std::vector<float> ours = floats(out);
  std::vector<float> ref = floats("../shared/models/qwen3-f16.1.logits");
  ASSERT_EQ(ours.size(), ref.size());
  for (size_t row = 0; row < ref.size() / 384; ++row) {
    double diff = 0, scale = 1;
    for (size_t j = 0; j < 384; ++j) {
      diff =
          std::max(diff, std::fabs(static_cast<double>(ours[row * 384 + j]) - ref[row * 384 + j]));
      scale = std::max(scale, std::fabs(static_cast<double>(ref[row * 384 + j])));
    }
    EXPECT_LT(diff / scale, 1e-2) << "row " << row;
  }
}

TEST(EvalCli, BadInputExitsWithOne) {
  const std::string out = ::testing::TempDir() + "/eval_cli_bad.f32";
  EXPECT_EQ(run("eval --model ../shared/models/qwen3-f16.gguf --tokens 1,x,3 --dump-logits " + out),
            1);
  EXPECT_EQ(run("eval --model ../shared/models/qwen3-f16.gguf --tokens 1,999 --dump-logits " + out),
            1);
  EXPECT_EQ(
      run("eval --model ../shared/vocab/ggml-vocab-qwen2.gguf --tokens 1 --dump-logits " + out), 1);
  EXPECT_EQ(run("eval --model /nonexistent.gguf --tokens 1 --dump-logits " + out), 1);
  EXPECT_EQ(run("run --model ../shared/models/qwen3-f16.gguf --prompt hi --ctx 4 -n 10"),
            0);  // stops at a full context
}

}  // namespace

#include "tokenizer/stream_decoder.h"

#include <gtest/gtest.h>

#include "gguf/reader.h"
#include "tokenizer/utf8.h"

namespace herd::tokenizer {
namespace {

using Ids = std::vector<int32_t>;

Tokenizer load(const char* path) {
  return Tokenizer::from_gguf(gguf::File::open(path));
}

bool is_valid_utf8(const std::string& s) {
  return sanitize_utf8(s) == s;
}

// Feeds ids one at a time; every chunk must be whole characters, and all chunks together
// must equal the one-shot decode.
void expect_streams_like_decode(const Tokenizer& t, const Ids& ids) {
  StreamDecoder stream(t);
  std::string streamed;
  for (int32_t id : ids) {
    const std::string chunk = stream.push(id);
    EXPECT_TRUE(is_valid_utf8(chunk)) << "partial UTF-8 emitted after id " << id;
    streamed += chunk;
  }
  streamed += stream.flush();
  EXPECT_EQ(streamed, t.decode(ids));
}

TEST(StreamDecoder, HoldsAnEmojiSplitOverByteTokens) {
  const Tokenizer spm = load("../shared/models/llama-f16.gguf");
  // "emoji 😀 ok": the emoji is four byte-fallback tokens <0xF0> <0x9F> <0x98> <0x80>.
  const Ids ids = spm.encode("emoji \xF0\x9F\x98\x80 ok", false, false);
  const Ids emoji = {243, 162, 155, 131};
  ASSERT_NE(std::search(ids.begin(), ids.end(), emoji.begin(), emoji.end()), ids.end());

  StreamDecoder stream(spm);
  std::string streamed;
  for (int32_t id : ids) {
    const std::string chunk = stream.push(id);
    if (id == 243 || id == 162 || id == 155) {
      EXPECT_EQ(chunk, "") << "an unfinished character is held";
    }
    if (id == 131) {
      EXPECT_EQ(chunk, "\xF0\x9F\x98\x80");
    }
    streamed += chunk;
  }
  EXPECT_EQ(stream.flush(), "");
  EXPECT_EQ(streamed, "emoji \xF0\x9F\x98\x80 ok");
  expect_streams_like_decode(spm, ids);
}

TEST(StreamDecoder, MatchesDecodeForByteLevelBpe) {
  const Tokenizer bpe = load("../shared/models/qwen2-f32.gguf");
  for (const char* text : {"emoji \xF0\x9F\x98\x80 ok", "\xE4\xBD\xA0\xE5\xA5\xBD\xE4\xB8\x96",
                           "caf\xC3\xA9 na\xC3\xAFve", "  spaces\n\ttabs  "}) {
    expect_streams_like_decode(bpe, bpe.encode(text, false, false));
  }
}

TEST(StreamDecoder, DropsTheSpmLeadingSpaceOnce) {
  const Tokenizer spm = load("../shared/models/llama-f16.gguf");
  const Ids ids = spm.encode("Hello world", true, false);  // BOS first
  StreamDecoder stream(spm);
  std::string streamed;
  for (int32_t id : ids) streamed += stream.push(id);
  streamed += stream.flush();
  EXPECT_EQ(streamed, "Hello world");
}

TEST(StreamDecoder, ControlTokensAreHiddenUnlessRendered) {
  const Tokenizer bpe = load("../shared/models/qwen2-f32.gguf");
  const Ids ids = bpe.encode("hi<|im_end|>", false, true);
  std::string hidden, shown;
  StreamDecoder quiet(bpe);
  StreamDecoder loud(bpe, /*render_special=*/true);
  for (int32_t id : ids) {
    hidden += quiet.push(id);
    shown += loud.push(id);
  }
  EXPECT_EQ(hidden + quiet.flush(), "hi");
  EXPECT_EQ(shown + loud.flush(), "hi<|im_end|>");
}

TEST(StreamDecoder, FlushReplacesAnUnfinishedCharacter) {
  const Tokenizer spm = load("../shared/models/llama-f16.gguf");
  StreamDecoder stream(spm);
  EXPECT_EQ(stream.push(259), "");  // '▁' alone: a leading space, dropped
  EXPECT_EQ(stream.push(243), "");  // <0xF0>, the start of a 4-byte character
  EXPECT_EQ(stream.push(162), "");  // <0x9F>
  EXPECT_EQ(stream.flush(), "\xEF\xBF\xBD");
  // A byte that can never start a character is replaced at once.
  EXPECT_EQ(stream.push(3 + 0x80), "\xEF\xBF\xBD");  // <0x80>
}

}  // namespace
}  // namespace herd::tokenizer

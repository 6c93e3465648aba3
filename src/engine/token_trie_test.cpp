#include "engine/token_trie.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

namespace herd::engine {
namespace {

// Accepts texts that are prefixes of `allowed` (a stand-in for a grammar's automaton).
struct PrefixOf {
  std::string allowed;
  size_t pos = 0;
  bool push(unsigned char c) {
    if (pos >= allowed.size() || static_cast<unsigned char>(allowed[pos]) != c) return false;
    ++pos;
    return true;
  }
};

std::vector<int32_t> walk(const TokenTrie& trie, const std::string& allowed, size_t n_vocab,
                          bool skip_space = false) {
  std::vector<uint8_t> mask(n_vocab, 0);
  std::vector<PrefixOf> scratch;
  trie.walk(PrefixOf{allowed}, skip_space, mask, scratch);
  std::vector<int32_t> ids;
  for (size_t i = 0; i < mask.size(); ++i) {
    if (mask[i]) ids.push_back(static_cast<int32_t>(i));
  }
  return ids;
}

TEST(TokenTrie, MarksEveryTokenTheStateAccepts) {
  const std::vector<std::string> texts = {"a", "ab", "abc", "b", "", "abd", "ab", " a", "x"};
  const TokenTrie trie(texts);
  // "ab" twice (ids 1 and 6); the empty text is never offered.
  EXPECT_EQ(walk(trie, "abc", texts.size()), (std::vector<int32_t>{0, 1, 2, 6}));
  EXPECT_EQ(walk(trie, "b", texts.size()), (std::vector<int32_t>{3}));
  EXPECT_EQ(walk(trie, "", texts.size()), (std::vector<int32_t>{}));
  // The first piece's space is dropped: " a" counts as "a".
  EXPECT_EQ(walk(trie, "a", texts.size(), true), (std::vector<int32_t>{0, 7}));
}

TEST(TokenTrie, AgreesWithCheckingEachToken) {
  std::vector<std::string> texts;
  for (int i = 0; i < 2000; ++i) {
    std::string t;
    for (int n = i; n > 0; n /= 3) t += static_cast<char>('a' + n % 3);
    texts.push_back(t);
  }
  const TokenTrie trie(texts);
  for (const std::string allowed : {"abcabc", "aaaa", "cba", "b"}) {
    std::vector<int32_t> expected;
    for (size_t t = 0; t < texts.size(); ++t) {
      PrefixOf p{allowed};
      bool ok = !texts[t].empty();
      for (char c : texts[t]) ok = ok && p.push(static_cast<unsigned char>(c));
      if (ok) expected.push_back(static_cast<int32_t>(t));
    }
    EXPECT_EQ(walk(trie, allowed, texts.size()), expected) << allowed;
  }
}

}  // namespace
}  // namespace herd::engine

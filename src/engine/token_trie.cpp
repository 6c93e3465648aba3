#include "engine/token_trie.h"

#include <algorithm>

#include "util/error.h"

namespace herd::engine {

TokenTrie::TokenTrie(const std::vector<std::string>& texts) {
  // Sorted texts visit the trie depth first: each text shares with the one before it the
  // path of their common prefix, so the nodes come out in depth-first order directly.
  std::vector<int32_t> order;
  for (size_t t = 0; t < texts.size(); ++t) {
    if (!texts[t].empty()) order.push_back(static_cast<int32_t>(t));
  }
  std::stable_sort(order.begin(), order.end(), [&](int32_t a, int32_t b) {
    return texts[static_cast<size_t>(a)] < texts[static_cast<size_t>(b)];
  });
  constexpr size_t kMaxText = 255;  // Node::depth is a byte; no real token is this long
  nodes_.push_back(Node{});
  std::vector<uint32_t> path = {0};  // node indices from the root to the last text's end
  std::string_view previous;
  for (int32_t id : order) {
    const std::string_view text = texts[static_cast<size_t>(id)];
    if (text.size() > kMaxText) continue;
    const auto [a, b] = std::mismatch(previous.begin(), previous.end(), text.begin(), text.end());
    const size_t shared = static_cast<size_t>(a - previous.begin());
    path.resize(shared + 1);
    for (size_t d = shared; d < text.size(); ++d) {
      Node n;
      n.byte = static_cast<uint8_t>(text[d]);
      n.depth = static_cast<uint8_t>(d + 1);
      path.push_back(static_cast<uint32_t>(nodes_.size()));
      nodes_.push_back(n);
    }
    Node& end = nodes_[path.back()];
    if (end.token_begin == end.token_end) end.token_begin = static_cast<uint32_t>(tokens_.size());
    HERD_CHECK(end.token_end == 0 || end.token_end == tokens_.size());
    tokens_.push_back(id);
    end.token_end = static_cast<uint32_t>(tokens_.size());
    previous = text;
    max_depth_ = std::max(max_depth_, text.size());
  }
  // Subtree sizes, children before parents (a child comes after its parent).
  std::vector<uint32_t> parent(nodes_.size(), 0);
  std::vector<uint32_t> last_at_depth(kMaxText + 2, 0);
  for (size_t i = 1; i < nodes_.size(); ++i) {
    last_at_depth[nodes_[i].depth] = static_cast<uint32_t>(i);
    parent[i] = last_at_depth[nodes_[i].depth - 1u];
  }
  for (size_t i = nodes_.size(); i-- > 1;) nodes_[parent[i]].size += nodes_[i].size;
}

}  // namespace herd::engine

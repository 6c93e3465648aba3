#include "tokenizer/special_tokens.h"

namespace herd::tokenizer {

namespace {
constexpr uint32_t kNoNode = 0xFFFFFFFF;
uint64_t edge_key(uint32_t node, uint8_t byte) {
  return (static_cast<uint64_t>(node) << 8) | byte;
}
}  // namespace

uint32_t SpecialTokenMatcher::child(uint32_t node, uint8_t byte) const {
  auto it = edges_.find(edge_key(node, byte));
  return it == edges_.end() ? kNoNode : it->second;
}

void SpecialTokenMatcher::add(std::string_view text, int32_t id, bool always) {
  if (text.empty()) return;
  uint32_t node = 0;
  for (char c : text) {
    const auto byte = static_cast<uint8_t>(c);
    uint32_t next = child(node, byte);
    if (next == kNoNode) {
      next = static_cast<uint32_t>(nodes_.size());
      nodes_.push_back(Node{});
      edges_.emplace(edge_key(node, byte), next);
    }
    node = next;
  }
  if (nodes_[node].id >= 0) return;
  nodes_[node].id = id;
  nodes_[node].always = always;
  const auto first = static_cast<uint8_t>(text[0]);
  first_byte_[first] = true;
  if (always) first_byte_always_[first] = true;
  ++n_tokens_;
}

std::optional<SpecialTokenMatch> SpecialTokenMatcher::find(std::string_view text, size_t from,
                                                           bool parse_special) const {
  if (n_tokens_ == 0) return std::nullopt;
  const auto& starts = parse_special ? first_byte_ : first_byte_always_;
  for (size_t pos = from; pos < text.size(); ++pos) {
    if (!starts[static_cast<uint8_t>(text[pos])]) continue;
    std::optional<SpecialTokenMatch> best;
    uint32_t node = 0;
    for (size_t i = pos; i < text.size(); ++i) {
      node = child(node, static_cast<uint8_t>(text[i]));
      if (node == kNoNode) break;
      const Node& n = nodes_[node];
      if (n.id >= 0 && (parse_special || n.always)) {
        best = SpecialTokenMatch{pos, i + 1 - pos, n.id};
      }
    }
    if (best) return best;
  }
  return std::nullopt;
}

}  // namespace herd::tokenizer

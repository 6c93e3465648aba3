#include "net/allow_list.h"

#include <algorithm>
#include <fstream>

#include "util/error.h"

namespace herd::net {

namespace {

bool is_space(char c) {
  return c == ' ' || c == '\t' || c == '\r';
}

}  // namespace

AllowList AllowList::parse(std::string_view text, std::string_view origin) {
  AllowList list;
  size_t line_no = 0;
  while (!text.empty()) {
    ++line_no;
    const size_t newline = text.find('\n');
    std::string_view line = text.substr(0, newline);
    text.remove_prefix(newline == std::string_view::npos ? text.size() : newline + 1);
    line = line.substr(0, line.find('#'));
    while (!line.empty() && is_space(line.front())) line.remove_prefix(1);
    while (!line.empty() && is_space(line.back())) line.remove_suffix(1);
    if (line.empty()) continue;
    const std::string where = std::string(origin) + " line " + std::to_string(line_no);
    NodeId id = NodeId::from_text(line, where);
    if (!list.contains(id)) list.ids_.push_back(id);
  }
  if (list.ids_.empty()) {
    throw Error("net", std::string(origin) +
                           ": names no node id, so every peer would be refused (one id per "
                           "line, as `herd node --show-id` prints)");
  }
  return list;
}

AllowList AllowList::load_file(const std::string& path) {
  const std::string origin = "allow-list '" + path + "'";
  std::ifstream in(path, std::ios::binary);
  if (!in) throw Error("net", origin + ": cannot open it");
  std::string text;
  char buffer[4096];
  while (in.read(buffer, sizeof buffer) || in.gcount() > 0) {
    text.append(buffer, static_cast<size_t>(in.gcount()));
    if (text.size() > kMaxFileBytes) {
      throw Error("net", origin + ": larger than " + std::to_string(kMaxFileBytes) + " bytes");
    }
  }
  return parse(text, origin);
}

bool AllowList::contains(const NodeId& id) const {
  return std::find(ids_.begin(), ids_.end(), id) != ids_.end();
}

}  // namespace herd::net

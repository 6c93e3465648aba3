// An allow-list of node ids (`--allow-ids FILE` on nodes and coordinators): a peer whose
// verified id (identity.h) is not on it is refused in the handshake, with an error naming
// its id, so the operator can add it when it is legitimate.
//
// File format (text): one id per line, as `herd node --show-id` prints it; '#' starts a
// comment (whole line or after the id); blank lines are ignored. Anything else on a line
// is an error naming the file and the line; an empty list is an error too (it would
// refuse every peer, surely not what was meant).
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "net/identity.h"

namespace herd::net {

class AllowList {
 public:
  static constexpr size_t kMaxFileBytes = size_t{1} << 20;

  // `origin` names the source in errors ("allow-list 'ids.txt'").
  static AllowList parse(std::string_view text, std::string_view origin);
  static AllowList load_file(const std::string& path);

  bool contains(const NodeId& id) const;
  const std::vector<NodeId>& ids() const { return ids_; }

 private:
  std::vector<NodeId> ids_;
};

}  // namespace herd::net

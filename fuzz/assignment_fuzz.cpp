// libFuzzer target: the LOAD message's plan_json, as a hostile coordinator may send it,
// parsed and given to assignment_from_json. It either yields an assignment whose fields are
// in range or fails with herd::Error (or nlohmann's parse errors for text that is not JSON or
// holds a number out of range, which json::parse throws before the assignment is read).
// Anything else (a crash, a sanitizer report, another exception type) is a bug.
// Two paths: the input as JSON text, and the input's first bytes as the shape of a tensor in
// an otherwise valid assignment (dimensions near powers of two up to 2^40, where the element
// count can wrap around 64 bits: random text rarely holds such numbers).
#include <cstdint>
#include <cstdlib>
#include <string_view>

#include <nlohmann/json.hpp>

#include "cluster/assignment.h"
#include "cluster/weight_cache.h"
#include "util/error.h"

namespace {

using herd::cluster::Assignment;
using herd::cluster::TensorDesc;

void check(const nlohmann::json& j) {
  using namespace herd::cluster;
  try {
    const Assignment a = assignment_from_json(j);
    if (a.n_stages < 1 || a.stage < 0 || a.stage >= a.n_stages) std::abort();
    if (a.shard.layer_begin < 0 || a.shard.layer_end < a.shard.layer_begin) std::abort();
    if (a.n_ctx < 1 || a.n_seq < 1) std::abort();
    // Stage links: a first stage accepts none, a last one dials none, addresses are text.
    if (a.flow.prev < 0 || a.flow.prev > 1 || (a.stage == 0 && a.flow.prev > 0)) std::abort();
    if (a.stage + 1 == a.n_stages && !a.flow.next.empty()) std::abort();
    for (const std::string& address : a.flow.next) {
      if (address.empty() || address.size() > 1024) std::abort();
    }
    for (const TensorDesc& t : a.tensors) {
      if (t.name.empty() || t.shape.empty() || t.shape.size() > 4) std::abort();
      // The element count the node would write for it: at most 2^44, without wrapping.
      unsigned __int128 elements = 1;
      for (int64_t d : t.shape) {
        if (d < 1) std::abort();
        elements *= static_cast<unsigned __int128>(d);
      }
      if (elements > (static_cast<unsigned __int128>(1) << 44)) std::abort();
    }
    // What the node does next with it: its cache file's name and the tensors' sizes, and the
    // JSON the coordinator would send.
    (void)shard_cache_path("/cache", herd::net::ContentHash{}, a);
    for (const TensorDesc& t : a.tensors) (void)data_bytes(t);
    const Assignment b = assignment_from_json(nlohmann::json::parse(to_json(a).dump()));
    if (b.tensors.size() != a.tensors.size() || b.shard.layer_end != a.shard.layer_end ||
        b.flow.next != a.flow.next || b.flow.prev != a.flow.prev || b.flow.token != a.flow.token) {
      std::abort();
    }
  } catch (const herd::Error&) {
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  try {
    check(nlohmann::json::parse(text));
  } catch (const nlohmann::json::exception&) {
    // not JSON, or a number out of range: refused before assignment_from_json
  }
  if (size >= 1) {
    nlohmann::json shape = nlohmann::json::array();
    for (size_t i = 1; i < size && i <= 1 + data[0] % 5u; ++i) {
      const int64_t dim = (int64_t{1} << (data[i] % 41)) + (data[i] >= 164 ? 1 : 0) -
                          (data[i] >= 205 && data[i] % 41 > 0 ? 2 : 0);
      shape.push_back(dim);
    }
    // A valid one-layer assignment, then the fuzzed shape in place of its tensor's.
    Assignment a;
    a.shard.layer_end = 1;
    a.n_ctx = 8;
    a.n_stages = 2;  // with a stage link to the next stage
    a.flow.token = 5;
    a.flow.next = {"127.0.0.1:7070"};
    a.tensors.push_back({"blk.0.ffn_up.weight", herd::TensorType::F32, {1}});
    nlohmann::json j = herd::cluster::to_json(a);
    j["tensors"][0]["shape"] = shape;
    check(j);
  }
  return 0;
}

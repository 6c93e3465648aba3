#include "cluster/assignment.h"

#include "plan/shard_spec.h"

#include <algorithm>
#include <string_view>

#include "net/activations.h"
#include "util/error.h"
#include "vulkan/device_choice.h"

namespace herd::cluster {
namespace {

[[noreturn]] void bad(const std::string& field, const std::string& problem) {
  throw Error("cluster", "assignment: field '" + field + "': " + problem);
}

// "<what> of tensor 'name'" (built by appending: g++ 12 warns falsely on "x" + string).
std::string of_tensor(const char* what, const std::string& name) {
  std::string text(what);
  text.append(" of tensor '").append(name).append("'");
  return text;
}

const nlohmann::json& field(const nlohmann::json& j, const char* name) {
  auto it = j.find(name);
  if (it == j.end()) bad(name, "missing");
  return *it;
}

int64_t int_field(const nlohmann::json& j, const char* name, int64_t lo, int64_t hi) {
  const nlohmann::json& v = field(j, name);
  if (!v.is_number_integer()) bad(name, "not an integer");
  const int64_t x = v.get<int64_t>();
  if (x < lo || x > hi) {
    bad(name,
        std::to_string(x) + " is outside [" + std::to_string(lo) + ", " + std::to_string(hi) + "]");
  }
  return x;
}

bool bool_field(const nlohmann::json& j, const char* name) {
  const nlohmann::json& v = field(j, name);
  if (!v.is_boolean()) bad(name, "not a boolean");
  return v.get<bool>();
}

bool in_layers(std::string_view name, int64_t begin, int64_t end) {
  if (name.substr(0, 4) != "blk.") return false;
  name.remove_prefix(4);
  int64_t layer = 0;
  size_t digits = 0;
  while (digits < name.size() && name[digits] >= '0' && name[digits] <= '9') {
    layer = layer * 10 + (name[digits] - '0');
    ++digits;
  }
  return digits > 0 && digits < name.size() && name[digits] == '.' && layer >= begin && layer < end;
}

// [begin, end] with -1 <= begin, end < 2^40 (the shard checks them against the model).
void read_range(const nlohmann::json& j, const char* name, int64_t& begin, int64_t& end) {
  const nlohmann::json& v = field(j, name);
  if (!v.is_array() || v.size() != 2 || !v[0].is_number_integer() || !v[1].is_number_integer()) {
    bad(std::string("slice.") + name, "not a pair of integers");
  }
  begin = v[0].get<int64_t>();
  end = v[1].get<int64_t>();
  constexpr int64_t kMax = int64_t{1} << 40;
  if (begin < 0 || begin > kMax || end < -1 || end > kMax) {
    bad(std::string("slice.") + name, "out of range");
  }
}

void read_slice(const nlohmann::json& j, engine::TensorSlice& slice) {
  if (!j.is_object()) bad("slice", "not an object");
  read_range(j, "head", slice.head_begin, slice.head_end);
  read_range(j, "kv_head", slice.kv_head_begin, slice.kv_head_end);
  read_range(j, "ff", slice.ff_begin, slice.ff_end);
  read_range(j, "vocab", slice.vocab_begin, slice.vocab_end);
  if (auto it = j.find("experts"); it != j.end()) {
    if (!it->is_array() || it->size() > (size_t{1} << 16)) bad("slice.experts", "not an array");
    std::vector<int64_t> experts;
    for (const nlohmann::json& e : *it) {
      if (!e.is_number_integer() || e.get<int64_t>() < 0 || e.get<int64_t>() > (1 << 16)) {
        bad("slice.experts", "an entry is not an expert index");
      }
      experts.push_back(e.get<int64_t>());
    }
    slice.experts = std::move(experts);
  }
}

void read_ring(const nlohmann::json& j, RingSpec& ring) {
  if (!j.is_object()) bad("ring", "not an object");
  const nlohmann::json& token = field(j, "token");
  if (!token.is_number_unsigned() && !token.is_number_integer()) bad("ring.token", "not a number");
  ring.token = token.get<uint64_t>();
  for (auto [name, link] : {std::pair{"next", &ring.next}, std::pair{"prev", &ring.prev}}) {
    const nlohmann::json& v = field(j, name);
    if (!v.is_string() || v.get<std::string>().size() > 1024)
      bad("ring", "a link is not an address");
    link->connect = v.get<std::string>();
  }
}

// Optional: an assignment without "flow" has no stage links.
void read_flow(const nlohmann::json& j, FlowSpec& flow, int stage, int n_stages) {
  if (!j.is_object()) bad("flow", "not an object");
  // Named "flow.<key>" in errors: "token" and "next" alone would be ambiguous with "ring".
  const auto member = [&](const char* name) -> const nlohmann::json& {
    auto it = j.find(name);
    if (it == j.end()) bad(std::string("flow.") + name, "missing");
    return *it;
  };
  const nlohmann::json& token = member("token");
  if (!token.is_number_unsigned() && !token.is_number_integer()) bad("flow.token", "not a number");
  flow.token = token.get<uint64_t>();
  const nlohmann::json& next = member("next");
  if (!next.is_array() || next.size() > 4096) bad("flow.next", "not an array of addresses");
  for (const nlohmann::json& v : next) {
    if (!v.is_string()) bad("flow.next", "an entry is not a string");
    const std::string address = v.get<std::string>();
    if (address.empty() || address.size() > 1024) bad("flow.next", "an address is empty or long");
    for (char c : address) {
      if (c <= 0x20 || c > 0x7e) bad("flow.next", "an address is not printable ASCII");
    }
    flow.next.push_back(address);
  }
  if (!flow.next.empty() && stage + 1 == n_stages) bad("flow.next", "the last stage has no next");
  const nlohmann::json& prev = member("prev");
  if (!prev.is_number_integer() || prev.get<int64_t>() < 0 || prev.get<int64_t>() > 1) {
    bad("flow.prev", "not 0 or 1");
  }
  flow.prev = static_cast<int>(prev.get<int64_t>());
  if (flow.prev > 0 && stage == 0) bad("flow.prev", "the first stage has no previous stage");
  if ((!flow.next.empty() || flow.prev > 0) && flow.token == 0) bad("flow.token", "0 for links");
}

// Optional: an assignment without "placement" has all of its part on its device. Read after
// the layers, the ranks and the device, which it is checked against.
void read_placement(const nlohmann::json& j, Assignment& a) {
  auto it = j.find("placement");
  if (it == j.end()) {
    if (j.contains("device_layers")) bad("device_layers", "without placement first-layers");
    return;
  }
  if (!it->is_string()) bad("placement", "not a string");
  const std::string placement = it->get<std::string>();
  if (placement != "device" && placement != "experts-on-cpu" && placement != "first-layers") {
    bad("placement", "'" + net::printable(placement.substr(0, 64)) +
                         "' is not device, experts-on-cpu or first-layers");
  }
  a.placement = placement;
  if (placement == "device") return;
  if (a.n_ranks > 1) {
    bad("placement", "a tensor-parallel rank runs on one device, not over a GPU and the CPU");
  }
  if (a.device == "cpu") bad("placement", placement + " needs a GPU device, not cpu");
  if (placement == "first-layers") {
    const int64_t layers = a.shard.layer_end - a.shard.layer_begin;
    if (layers < 2) bad("device_layers", "a part of one layer is not split by layers");
    a.device_layers = int_field(j, "device_layers", 1, layers - 1);
  } else if (j.contains("device_layers")) {
    bad("device_layers", "without placement first-layers");
  }
}

}  // namespace

nlohmann::json to_json(const Assignment& a) {
  nlohmann::json tensors = nlohmann::json::array();
  for (const TensorDesc& t : a.tensors) {
    tensors.push_back(
        {{"name", t.name}, {"type", static_cast<uint32_t>(t.type)}, {"shape", t.shape}});
  }
  const engine::TensorSlice& sl = a.shard.slice;
  nlohmann::json slice = {{"head", {sl.head_begin, sl.head_end}},
                          {"kv_head", {sl.kv_head_begin, sl.kv_head_end}},
                          {"ff", {sl.ff_begin, sl.ff_end}},
                          {"vocab", {sl.vocab_begin, sl.vocab_end}}};
  if (sl.experts) slice["experts"] = *sl.experts;
  nlohmann::json j = {
      {"stage", a.stage},
      {"n_stages", a.n_stages},
      {"rank", a.rank},
      {"n_ranks", a.n_ranks},
      {"slice", slice},
      {"ring",
       {{"token", a.ring.token}, {"next", a.ring.next.connect}, {"prev", a.ring.prev.connect}}},
      {"flow", {{"token", a.flow.token}, {"next", a.flow.next}, {"prev", a.flow.prev}}},
      {"standby", a.standby},
      {"layer_begin", a.shard.layer_begin},
      {"layer_end", a.shard.layer_end},
      {"embedding", a.shard.embedding},
      {"output", a.shard.output},
      {"n_ctx", a.n_ctx},
      {"n_seq", a.n_seq},
      {"wire_dtype", std::string(net::wire_dtype_name(a.wire_dtype))},
      {"tensors", tensors}};
  if (a.device) j["device"] = *a.device;
  if (a.placement != "device") j["placement"] = a.placement;
  if (a.placement == "first-layers") j["device_layers"] = a.device_layers;
  return j;
}

Assignment assignment_from_json(const nlohmann::json& j) {
  if (!j.is_object()) throw Error("cluster", "assignment: not a JSON object");
  constexpr int64_t kMaxLayers = 1 << 20;
  Assignment a;
  a.n_stages = static_cast<int>(int_field(j, "n_stages", 1, 4096));
  a.stage = static_cast<int>(int_field(j, "stage", 0, a.n_stages - 1));
  a.n_ranks = static_cast<int>(int_field(j, "n_ranks", 1, 4096));
  a.rank = static_cast<int>(int_field(j, "rank", 0, a.n_ranks - 1));
  read_slice(field(j, "slice"), a.shard.slice);
  read_ring(field(j, "ring"), a.ring);
  if (auto flow = j.find("flow"); flow != j.end()) read_flow(*flow, a.flow, a.stage, a.n_stages);
  if (auto standby = j.find("standby"); standby != j.end()) {
    if (!standby->is_boolean()) bad("standby", "not true or false");
    a.standby = standby->get<bool>();
    if (a.standby && (!a.flow.next.empty() || a.flow.prev > 0 || !a.ring.next.connect.empty() ||
                      !a.ring.prev.connect.empty())) {
      bad("standby", "a spare has no ring or stage links");
    }
  }
  a.shard.layer_begin = int_field(j, "layer_begin", 0, kMaxLayers);
  a.shard.layer_end = int_field(j, "layer_end", a.shard.layer_begin, kMaxLayers);
  a.shard.embedding = bool_field(j, "embedding");
  a.shard.output = bool_field(j, "output");
  if (auto device = j.find("device"); device != j.end()) {
    if (!device->is_string() || device->get<std::string>().size() > 64) {
      bad("device", "not a device name");
    }
    vulkan::DeviceChoice choice;
    try {
      choice = vulkan::parse_device_choice(device->get<std::string>());
    } catch (const Error& e) {
      bad("device", e.what());
    }
    if (choice.kind == vulkan::DeviceChoice::kAuto) bad("device", "auto is the node's choice");
    a.device = device->get<std::string>();
  }
  read_placement(j, a);
  a.n_ctx = int_field(j, "n_ctx", 1, int64_t{1} << 24);
  a.n_seq = int_field(j, "n_seq", 1, 4096);
  const nlohmann::json& dtype = field(j, "wire_dtype");
  if (!dtype.is_string()) bad("wire_dtype", "not a string");
  const std::string dtype_text = dtype.get<std::string>();
  try {
    a.wire_dtype = net::parse_wire_dtype(dtype_text);
  } catch (const Error&) {
    bad("wire_dtype",
        std::string("'").append(net::printable(dtype_text)).append("' is not f32, f16 or q8_0"));
  }
  const nlohmann::json& tensors = field(j, "tensors");
  if (!tensors.is_array()) bad("tensors", "not an array");
  if (tensors.size() > (size_t{1} << 20)) bad("tensors", "too many");
  for (const nlohmann::json& t : tensors) {
    if (!t.is_object()) bad("tensors", "an entry is not an object");
    TensorDesc d;
    const nlohmann::json& name = field(t, "name");
    if (!name.is_string()) bad("tensors.name", "not a string");
    d.name = name.get<std::string>();
    if (d.name.empty() || d.name.size() > net::kMaxTensorNameBytes) {
      bad("tensors.name", "empty or longer than " + std::to_string(net::kMaxTensorNameBytes));
    }
    for (char c : d.name) {
      if (c < 0x20 || c > 0x7e) bad("tensors.name", "not printable ASCII");
    }
    const int64_t type = int_field(t, "type", 0, 1 << 16);
    if (find_type_traits(static_cast<uint32_t>(type)) == nullptr) {
      bad("tensors.type", of_tensor("unknown type", d.name));
    }
    d.type = static_cast<TensorType>(type);
    const nlohmann::json& shape = field(t, "shape");
    if (!shape.is_array() || shape.empty() || shape.size() > 4) {
      bad("tensors.shape", of_tensor("not 1 to 4 dimensions", d.name));
    }
    uint64_t elements = 1;
    for (const nlohmann::json& dim : shape) {
      if (!dim.is_number_integer() || dim.get<int64_t>() < 1 ||
          dim.get<int64_t>() > (int64_t{1} << 40)) {
        bad("tensors.shape", of_tensor("a dimension outside [1, 2^40]", d.name));
      }
      // Checked before multiplying: 2^40 x 2^40 would wrap around 64 bits to 0.
      const auto n = static_cast<uint64_t>(dim.get<int64_t>());
      if (elements > (uint64_t{1} << 44) / n) bad("tensors.shape", of_tensor("too large", d.name));
      elements *= n;
      d.shape.push_back(dim.get<int64_t>());
    }
    a.tensors.push_back(std::move(d));
  }
  return a;
}

std::vector<TensorDesc> shard_tensors(const gguf::File& file, const ModelInfo& info,
                                      const engine::ShardSpec& spec) {
  const int64_t end = spec.layer_end < 0 ? info.hp.n_layer : spec.layer_end;
  // Per-layer inputs (Gemma 4): every stage with layers computes its own from the tokens.
  const bool per_layer = info.hp.n_embd_per_layer > 0 && end > spec.layer_begin;
  const bool needs_embd = spec.embedding || (spec.output && info.hp.tied_output) || per_layer;
  std::vector<TensorDesc> tensors;
  for (const gguf::TensorInfo& t : file.tensors()) {
    const std::string_view name = t.name;
    bool take = in_layers(name, spec.layer_begin, end);
    take = take || (needs_embd && name == "token_embd.weight");
    take = take || (per_layer && name.starts_with("per_layer_"));
    // Tensors the model's table does not list (rope_freqs) are never cut.
    const TensorSpec* spec_of_t = find_tensor_spec(info, name);
    // The head's tensors: output_norm, output and whatever else the list puts outside the
    // blocks besides the embedding (hyper-connections' output_hc_*) and the per-layer inputs
    // (which go with the layers).
    take = take || (spec.output && spec_of_t != nullptr && spec_of_t->layer < 0 &&
                    spec_of_t->role != TensorRole::kEmbedding && !name.starts_with("per_layer_"));
    take = take || name == "rope_freqs.weight";
    if (!take) continue;
    const WeightCut cut =
        spec_of_t != nullptr ? weight_cut(*spec_of_t, spec.slice, info.hp) : WeightCut{};
    std::vector<int64_t> shape = cut_shape(name, t.type, t.shape, cut);
    if (std::find(shape.begin(), shape.end(), 0) != shape.end()) continue;  // none of it
    tensors.push_back({std::string(t.name), t.type, std::move(shape)});
  }
  return tensors;
}

uint64_t data_bytes(const TensorDesc& t) {
  uint64_t bytes = row_bytes(t.type, t.shape.at(0));
  for (size_t d = 1; d < t.shape.size(); ++d) bytes *= static_cast<uint64_t>(t.shape[d]);
  return bytes;
}

Assignment assignment_for(const Plan& plan, int stage, int rank, const gguf::File& file,
                          const ModelInfo& info, net::WireDType wire_dtype) {
  const Stage& s = plan.stages.at(static_cast<size_t>(stage));
  const Rank& r = s.ranks.at(static_cast<size_t>(rank));
  Assignment a;
  a.stage = stage;
  a.n_stages = static_cast<int>(plan.stages.size());
  a.rank = rank;
  a.n_ranks = static_cast<int>(s.ranks.size());
  a.shard = shard_spec(s, r, info.hp.n_expert > 0);
  // Where the plan put the part on the node (device_ranks.h): its GPU, all of it or split
  // with its CPU (one-rank stages only), or the CPU.
  const bool split = r.placement == "experts-on-cpu" || r.placement == "first-layers";
  a.device = r.device.empty() ? "cpu" : r.device;
  if (split && !r.device.empty()) {
    a.placement = r.placement;
    a.device_layers = r.placement == "first-layers" ? r.device_layers : 0;
  }
  a.n_ctx = plan.n_ctx;
  a.n_seq = plan.n_seq;
  a.wire_dtype = wire_dtype;
  a.tensors = shard_tensors(file, info, a.shard);
  return a;
}

engine::DevicePlacement planned_placement(const Assignment& a) {
  engine::DevicePlacement p;
  if (a.placement == "experts-on-cpu") p.kind = engine::DevicePlacement::kExpertsOnCpu;
  if (a.placement == "first-layers") {
    p.kind = engine::DevicePlacement::kFirstLayers;
    p.device_layers = a.device_layers;
  }
  return p;
}

}  // namespace herd::cluster

#include "plan/planner.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <numeric>
#include <optional>
#include <string>

#include "plan/apportion.h"
#include "plan/candidates.h"
#include "plan/device_ranks.h"
#include "plan/rank_memory.h"
#include "util/error.h"

namespace herd {
namespace {

// kAuto: nodes are "similar" when the fastest has at most this much more bandwidth than
// the slowest, and tensor parallelism is tried across at most this many of them (the ring
// all-reduce takes 2 (T - 1) steps per reduction, twice per layer).
constexpr double kSimilarBandwidth = 1.25;
constexpr size_t kAutoTensorMaxRanks = 4;
// Bytes the ceil() of each sliced part may add beyond its exact share.
constexpr uint64_t kRoundingMarginBytes = 64;

// ---------------------------------------------------------------------------------------
// Input checks: the planner's input comes from files and from other machines.

void check_input(const PlanModel& m, const std::vector<NodeProfile>& nodes, const PlanOptions& o) {
  auto bad_model = [](const std::string& what) { throw Error("plan", "model: " + what); };
  if (m.n_layer < 1 || m.n_layer > 65536) bad_model("n_layer must be between 1 and 65536");
  if (m.layers.size() != static_cast<size_t>(m.n_layer))
    bad_model("layer sizes do not match n_layer");
  if (m.n_vocab < 1 || m.n_embd < 1 || m.head_dim < 1 || m.n_ff < 1) {
    bad_model("n_vocab, n_embd, head_dim and n_ff must be positive");
  }
  if (m.n_head < 1 || m.n_head_kv < 1 || m.n_head % m.n_head_kv != 0) {
    bad_model("n_head (" + std::to_string(m.n_head) +
              ") must be a positive multiple of n_head_kv (" + std::to_string(m.n_head_kv) + ")");
  }
  if (m.n_expert < 0 || (m.n_expert > 0 && (m.n_expert_used < 1 || m.n_expert_used > m.n_expert))) {
    bad_model("n_expert_used must be between 1 and n_expert");
  }
  if (m.attn_output_block < 1 || m.ffn_down_block < 1) bad_model("block sizes must be positive");
  if (nodes.empty()) throw Error("plan", "no nodes to plan for");
  if (nodes.size() > 4096) throw Error("plan", "more than 4096 nodes");
  for (size_t i = 0; i < nodes.size(); ++i) {
    if (!(nodes[i].bandwidth_gbs > 0) || !std::isfinite(nodes[i].bandwidth_gbs)) {
      throw Error("plan", "node " + std::to_string(i) + " ('" + nodes[i].name +
                              "'): bandwidth_gbs must be a positive number");
    }
  }
  if (o.n_ctx < 1 || o.n_ctx > (int64_t{1} << 26))
    throw Error("plan", "n_ctx must be between 1 and 2^26");
  if (o.n_seq < 1 || o.n_seq > 65536) throw Error("plan", "n_seq must be between 1 and 65536");
  if (o.n_batch < 1 || o.n_batch > (int64_t{1} << 20))
    throw Error("plan", "n_batch must be between 1 and 2^20");
  if (!(o.memory_headroom > 0 && o.memory_headroom <= 1)) {
    throw Error("plan", "memory headroom must be in (0, 1]");
  }
  if (o.mode == PlanOptions::Mode::kHybrid && (o.pipeline_stages < 1 || o.tensor_ranks < 1)) {
    throw Error("plan", "pipeline stages and tensor ranks must be at least 1");
  }
}

// ---------------------------------------------------------------------------------------
// The planner's view of the input, computed once.

// Prefix sums of the layers' byte groups: any layer range's sums in O(1).
class LayerSums {
 public:
  explicit LayerSums(const PlanModel& m) : prefix_(m.layers.size() + 1) {
    for (size_t i = 0; i < m.layers.size(); ++i) {
      const PlanLayer& l = m.layers[i];
      PlanLayer& p = prefix_[i + 1];
      p.replicated_bytes = prefix_[i].replicated_bytes + l.replicated_bytes;
      p.attn_q_bytes = prefix_[i].attn_q_bytes + l.attn_q_bytes;
      p.attn_kv_bytes = prefix_[i].attn_kv_bytes + l.attn_kv_bytes;
      p.ffn_bytes = prefix_[i].ffn_bytes + l.ffn_bytes;
      p.kv_cache_bytes = prefix_[i].kv_cache_bytes + l.kv_cache_bytes;
    }
  }
  PlanLayer range(int64_t begin, int64_t end) const {
    const PlanLayer& a = prefix_[static_cast<size_t>(begin)];
    const PlanLayer& b = prefix_[static_cast<size_t>(end)];
    return {.replicated_bytes = b.replicated_bytes - a.replicated_bytes,
            .attn_q_bytes = b.attn_q_bytes - a.attn_q_bytes,
            .attn_kv_bytes = b.attn_kv_bytes - a.attn_kv_bytes,
            .ffn_bytes = b.ffn_bytes - a.ffn_bytes,
            .kv_cache_bytes = b.kv_cache_bytes - a.kv_cache_bytes};
  }

 private:
  std::vector<PlanLayer> prefix_;  // [n_layer + 1]
};

// How the stages of a plan whose groups have T ranks cut their work.
struct Slicing {
  int64_t head_unit = 1;  // query heads come in multiples of this
  int64_t ffn_unit = 1;   // FFN rows come in multiples of this
  bool expert_parallel = false;
  int64_t kv_slack = 0;   // KV heads a rank may hold beyond its share of them
  int64_t cell_unit = 0;  // FFN cells (rows x experts) a rank may hold beyond its share
};

// One group of nodes running one layer range: does it fit, with which shares, how fast.
struct GroupFit {
  bool fits = false;
  std::vector<double> fraction;  // per rank: share of heads, FFN, experts and vocabulary
  double seconds = 0;            // per token, of the slowest rank
};

class Planner {
 public:
  Planner(const PlanModel& m, const std::vector<NodeProfile>& nodes, const PlanOptions& o)
      : m_(m), nodes_(nodes), o_(o), sums_(m) {
    // A node's GPU adds its memory and speed (device_ranks.h); the only rank of a stage
    // splits its part over both (rank_splits).
    for (size_t i = 0; i < nodes.size(); ++i) {
      usable_.push_back(node_capacity(nodes[i], o, false));
      usable_split_.push_back(node_capacity(nodes[i], o, rank_splits(1)));
    }
    // The coordinator's speed counts only when it holds layers.
    count_prefill_ = true;
    for (size_t i = o.use_local ? 0 : 1; i < nodes.size(); ++i) {
      count_prefill_ = count_prefill_ && nodes[i].matmul_gflops > 0;
    }
  }

  // The best pipeline whose stages are these groups (in order; a group may get no layers
  // and is then left out), or nullopt when no assignment of layers fits.
  std::optional<Plan> pipeline(const std::vector<std::vector<int>>& groups) const;
  // The error for a model that fits no way the nodes were grouped.
  Error no_fit_error(const std::vector<int>& nodes, const std::string& how) const;
  // In tensor mode, ranks that cannot hold the parts every rank keeps whole are left out.
  std::vector<int> drop_small_ranks(const std::vector<int>& nodes,
                                    std::vector<std::string>& notes) const;
  Slicing slicing(int64_t n_ranks) const;

 private:
  GroupFit fit_group(const std::vector<int>& group, int64_t begin, int64_t end) const;
  Stage build_stage(const std::vector<int>& group, int64_t begin, int64_t end) const;
  RankLoad load(int64_t begin, int64_t end, bool embedding) const;
  double speed(int node) const { return nodes_[static_cast<size_t>(node)].bandwidth_gbs * 1e9; }
  // Seconds of one rank of `node` per token (planner.h): `read` bytes decoded and a share
  // `fraction` of the matrix work of `n_layers` layers for kPromptTokensPerReplyToken
  // prompt tokens.
  double rank_seconds(int node, double read, double fraction, int64_t n_layers,
                      size_t stage_ranks) const {
    double s =
        node_read_seconds(nodes_[static_cast<size_t>(node)], read, o_, rank_splits(stage_ranks));
    if (count_prefill_) {
      s += kPromptTokensPerReplyToken * fraction * static_cast<double>(n_layers) *
           m_.layer_flops_per_token() / (nodes_[static_cast<size_t>(node)].matmul_gflops * 1e9);
    }
    return s;
  }
  std::string node_name(int node) const {
    return "'" + nodes_[static_cast<size_t>(node)].name + "'";
  }

  const PlanModel& m_;
  const std::vector<NodeProfile>& nodes_;
  const PlanOptions& o_;
  LayerSums sums_;
  // The bytes a node offers one rank of a tensor-parallel stage, and the only rank of a stage.
  uint64_t usable(int node, size_t stage_ranks) const {
    return (stage_ranks == 1 ? usable_split_ : usable_)[static_cast<size_t>(node)];
  }

  std::vector<uint64_t> usable_, usable_split_;  // per node
  bool count_prefill_ = false;  // every node that may hold layers measured its matmul speed
};

Slicing Planner::slicing(int64_t n_ranks) const {
  Slicing s;
  const int64_t group = m_.n_head / m_.n_head_kv;  // query heads per KV head
  // Heads come in units of k heads such that attn_output's column slices are whole quant
  // blocks; preferably whole GQA groups (no KV head computed twice), preferably at least
  // one unit per rank.
  // (attn_output has a head's value size of columns per head: MLA's differs from its key's.)
  const int64_t cols_per_head = m_.hp.head_dim_v > 0 ? m_.hp.head_dim_v : m_.head_dim;
  auto whole_blocks = [&](int64_t k) { return (k * cols_per_head) % m_.attn_output_block == 0; };
  std::vector<int64_t> units;
  for (int64_t k = group; k <= m_.n_head; k += group) {
    if (m_.n_head % k == 0) units.push_back(k);
  }
  for (int64_t k = 1; k <= m_.n_head; ++k) {
    if (m_.n_head % k == 0 && k % group != 0) units.push_back(k);
  }
  s.head_unit = 0;
  for (int64_t k : units) {
    if (whole_blocks(k) && m_.n_head / k >= n_ranks) {
      s.head_unit = k;
      break;
    }
  }
  for (int64_t k : units) {
    if (s.head_unit == 0 && whole_blocks(k)) s.head_unit = k;
  }
  if (s.head_unit == 0) s.head_unit = 1;
  s.ffn_unit = std::gcd(m_.n_ff, m_.ffn_down_block);
  s.expert_parallel = m_.moe() && n_ranks > 1 &&
                      (o_.moe == PlanOptions::MoeMode::kExpertParallel ||
                       (o_.moe == PlanOptions::MoeMode::kAuto && m_.n_expert >= n_ranks));
  // A rank's share of query heads is off by less than one unit, and a range of heads that
  // does not start and end on a GQA group reads up to two KV heads more than its share.
  s.kv_slack =
      s.head_unit % group == 0 ? s.head_unit / group : (s.head_unit + group - 1) / group + 2;
  s.kv_slack = std::min(s.kv_slack, m_.n_head_kv);
  s.cell_unit = !m_.moe() ? s.ffn_unit : s.expert_parallel ? m_.n_ff : s.ffn_unit * m_.n_expert;
  return s;
}

// A rank of a stage running layers [begin, end) with no slices yet (no heads, FFN rows or
// vocabulary): what it holds whole. Callers add the slices.
RankLoad Planner::load(int64_t begin, int64_t end, bool embedding) const {
  RankLoad l;
  l.layer_begin = begin;
  l.n_layers = end - begin;
  l.n_recurrent = m_.recurrent_layers(begin, end);
  l.layers = sums_.range(begin, end);
  l.embedding = embedding;
  l.output = end == m_.n_layer;
  return l;
}

GroupFit Planner::fit_group(const std::vector<int>& group, int64_t begin, int64_t end) const {
  GroupFit fit;
  const bool output = end == m_.n_layer;
  const PlanLayer sums = sums_.range(begin, end);
  // Bytes one decoded token reads: every weight of the range once, but only the routed
  // experts of an MoE FFN; the output head on the last stage. Norms and routers are read by
  // every rank; the rest is split.
  const double ffn_read = m_.moe() ? static_cast<double>(sums.ffn_bytes) *
                                         static_cast<double>(m_.n_expert_used) /
                                         static_cast<double>(m_.n_expert)
                                   : static_cast<double>(sums.ffn_bytes);
  const double whole_read = static_cast<double>(sums.replicated_bytes);
  const double split_read = static_cast<double>(sums.attn_q_bytes + sums.attn_kv_bytes) + ffn_read +
                            (output ? static_cast<double>(m_.output_bytes) : 0.0);
  const int64_t n_ranks = static_cast<int64_t>(group.size());
  const int64_t cells = m_.n_ff * std::max<int64_t>(1, m_.n_expert);

  if (n_ranks == 1) {
    const int node = group[0];
    RankLoad all = load(begin, end, begin == 0);
    all.heads = m_.n_head;
    all.kv_heads = m_.n_head_kv;
    all.ffn_cells = cells;
    all.vocab_rows = output ? m_.n_vocab : 0;
    fit.fits = estimate_memory(m_, o_, all).total() <= usable(node, 1);
    fit.fraction = {1.0};
    fit.seconds = rank_seconds(node, whole_read + split_read, 1.0, end - begin, 1);
    return fit;
  }

  // Memory of rank r as a function of its share f: fixed + f * split, plus at most `slack`
  // for rounding its ranges to whole units. Its cap is the largest f that fits.
  const Slicing s = slicing(n_ranks);
  std::vector<double> speeds, caps;
  for (int64_t r = 0; r < n_ranks; ++r) {
    const int node = group[static_cast<size_t>(r)];
    const uint64_t usable = usable_[static_cast<size_t>(node)];
    const RankLoad none = load(begin, end, begin == 0 && r == 0);
    RankLoad all = none, unit = none;
    all.heads = m_.n_head;
    all.kv_heads = m_.n_head_kv;
    all.ffn_cells = cells;
    all.vocab_rows = output ? m_.n_vocab : 0;
    unit.heads = s.head_unit;
    unit.kv_heads = s.kv_slack;
    unit.ffn_cells = s.cell_unit;
    unit.vocab_rows = output ? 1 : 0;
    const uint64_t fixed = estimate_memory(m_, o_, none).total();
    const uint64_t split = estimate_memory(m_, o_, all).total() - fixed;
    const uint64_t slack = estimate_memory(m_, o_, unit).total() - fixed + kRoundingMarginBytes;
    if (fixed > usable) return fit;
    double cap = 0;
    if (usable >= fixed + slack) {
      // Scaled down a little so that floating-point rounding never lands just above it.
      cap = split == 0 ? 2.0
                       : static_cast<double>(usable - fixed - slack) / static_cast<double>(split) *
                             (1 - 1e-9);
    }
    speeds.push_back(speed(node));
    caps.push_back(cap);
  }
  std::optional<std::vector<double>> fraction = share_by_speed(speeds, caps);
  if (!fraction) return fit;
  fit.fits = true;
  fit.fraction = std::move(*fraction);
  for (int64_t r = 0; r < n_ranks; ++r) {
    const size_t i = static_cast<size_t>(r);
    fit.seconds =
        std::max(fit.seconds, rank_seconds(group[i], whole_read + fit.fraction[i] * split_read,
                                           fit.fraction[i], end - begin, group.size()));
  }
  return fit;
}

Stage Planner::build_stage(const std::vector<int>& group, int64_t begin, int64_t end) const {
  const GroupFit fit = fit_group(group, begin, end);
  HERD_CHECK(fit.fits);
  const int64_t n_ranks = static_cast<int64_t>(group.size());
  const Slicing s = slicing(n_ranks);
  const bool whole = n_ranks == 1;
  Stage stage;
  stage.layer_begin = begin;
  stage.layer_end = end;
  stage.embedding = begin == 0;
  stage.output = end == m_.n_layer;
  const int64_t group_size = m_.n_head / m_.n_head_kv;
  const std::vector<int64_t> heads = split_ranges(m_.n_head, whole ? 1 : s.head_unit, fit.fraction);
  const std::vector<int64_t> rows = split_ranges(m_.n_ff, whole ? 1 : s.ffn_unit, fit.fraction);
  const std::vector<int64_t> experts = split_ranges(m_.n_expert, 1, fit.fraction);
  const std::vector<int64_t> vocab = split_ranges(m_.n_vocab, 1, fit.fraction);
  std::vector<int> kv_users(static_cast<size_t>(m_.n_head_kv), 0);
  for (int64_t r = 0; r < n_ranks; ++r) {
    const size_t i = static_cast<size_t>(r);
    Rank rank;
    rank.node = group[i];
    rank.embedding = stage.embedding && r == 0;
    rank.head_begin = heads[i];
    rank.head_end = heads[i + 1];
    rank.kv_head_begin = rank.head_begin / group_size;
    rank.kv_head_end = rank.head_end > rank.head_begin
                           ? (rank.head_end + group_size - 1) / group_size
                           : rank.kv_head_begin;
    for (int64_t kv = rank.kv_head_begin; kv < rank.kv_head_end; ++kv)
      ++kv_users[static_cast<size_t>(kv)];
    if (!m_.moe()) {
      rank.ff_begin = rows[i];
      rank.ff_end = rows[i + 1];
    } else if (s.expert_parallel) {
      rank.ff_begin = 0;
      rank.ff_end = m_.n_ff;
      for (int64_t e = experts[i]; e < experts[i + 1]; ++e) rank.experts.push_back(e);
    } else {
      rank.ff_begin = rows[i];
      rank.ff_end = rows[i + 1];
      for (int64_t e = 0; e < m_.n_expert; ++e) rank.experts.push_back(e);
    }
    if (stage.output) {
      rank.vocab_begin = vocab[i];
      rank.vocab_end = vocab[i + 1];
    }
    rank.memory_bytes = estimate_memory(m_, o_, rank_load(m_, stage, rank)).total();
    HERD_CHECK_MSG(rank.memory_bytes <= usable(group[i], group.size()),
                   "rank of node " + std::to_string(group[i]) + " needs " +
                       std::to_string(rank.memory_bytes) + " bytes");
    stage.ranks.push_back(std::move(rank));
  }
  for (int64_t kv = 0; kv < m_.n_head_kv; ++kv) {
    if (kv_users[static_cast<size_t>(kv)] > 1) stage.shared_kv_heads.push_back(kv);
  }
  return stage;
}

std::optional<Plan> Planner::pipeline(const std::vector<std::vector<int>>& groups) const {
  // best[g][j]: the best way for groups [0, g) to run layers [0, j): the slowest stage's
  // time per token first, then the sum of the stages' times (the latency of one token).
  struct Best {
    bool ok = false;
    double worst = 0, total = 0;
    int64_t from = 0;  // group g - 1 runs layers [from, j)
  };
  auto better = [](const Best& a, const Best& b) {
    if (!a.ok || !b.ok) return a.ok && !b.ok;
    return a.worst != b.worst ? a.worst < b.worst : a.total < b.total;
  };
  const int64_t n_layer = m_.n_layer;
  const size_t n_groups = groups.size();
  std::vector<std::vector<Best>> best(n_groups + 1,
                                      std::vector<Best>(static_cast<size_t>(n_layer + 1)));
  best[0][0] = {true, 0, 0, 0};
  for (size_t g = 0; g < n_groups; ++g) {
    for (int64_t end = 0; end <= n_layer; ++end) {
      const Best& skip = best[g][static_cast<size_t>(end)];
      Best current = skip;  // the group gets no layers
      current.from = end;
      // A longer range needs more memory: once one does not fit, none longer does.
      for (int64_t begin = end - 1; begin >= 0; --begin) {
        const Best& before = best[g][static_cast<size_t>(begin)];
        if (!before.ok || !m_.can_start_stage(begin)) continue;
        const GroupFit fit = fit_group(groups[g], begin, end);
        if (!fit.fits) break;
        const Best candidate{true, std::max(before.worst, fit.seconds), before.total + fit.seconds,
                             begin};
        if (better(candidate, current)) current = candidate;
      }
      best[g + 1][static_cast<size_t>(end)] = current;
    }
  }
  if (!best[n_groups][static_cast<size_t>(n_layer)].ok) return std::nullopt;

  std::vector<std::pair<int64_t, int64_t>> ranges(n_groups);
  for (int64_t g = static_cast<int64_t>(n_groups) - 1, end = n_layer; g >= 0; --g) {
    const int64_t begin = best[static_cast<size_t>(g + 1)][static_cast<size_t>(end)].from;
    ranges[static_cast<size_t>(g)] = {begin, end};
    end = begin;
  }
  Plan plan;
  plan.n_ctx = o_.n_ctx;
  plan.n_seq = o_.n_seq;
  for (size_t g = 0; g < n_groups; ++g) {
    const auto [begin, end] = ranges[g];
    if (begin < end) {
      plan.stages.push_back(build_stage(groups[g], begin, end));
      continue;
    }
    bool holds_a_layer = false;
    for (int64_t il = 0; il < n_layer && !holds_a_layer; ++il) {
      holds_a_layer = fit_group(groups[g], il, il + 1).fits;
    }
    for (int node : groups[g]) {
      plan.notes.push_back("node " + node_name(node) + " left out: " +
                           (holds_a_layer
                                ? std::string("the other nodes are faster and hold every layer")
                                : "too little memory for even one layer (" +
                                      memory_text(usable(node, groups[g].size())) + " usable)"));
    }
  }
  return plan;
}

std::vector<int> Planner::drop_small_ranks(const std::vector<int>& nodes,
                                           std::vector<std::string>& notes) const {
  if (nodes.size() < 2) return nodes;
  const Slicing s = slicing(static_cast<int64_t>(nodes.size()));
  std::vector<int> kept;
  for (int node : nodes) {
    RankLoad none = load(0, m_.n_layer, false), unit = none;
    unit.heads = s.head_unit;
    unit.kv_heads = s.kv_slack;
    unit.ffn_cells = s.cell_unit;
    unit.vocab_rows = 1;
    if (estimate_memory(m_, o_, unit).total() <= usable_[static_cast<size_t>(node)]) {
      kept.push_back(node);
    } else {
      notes.push_back("node " + node_name(node) +
                      " left out: " + memory_text(usable_[static_cast<size_t>(node)]) +
                      " usable is too little for the parts every tensor rank holds whole (" +
                      memory_text(estimate_memory(m_, o_, none).total()) + ")");
    }
  }
  return kept.empty() ? nodes : kept;
}

Error Planner::no_fit_error(const std::vector<int>& nodes, const std::string& how) const {
  RankLoad all = load(0, m_.n_layer, true);
  all.heads = m_.n_head;
  all.kv_heads = m_.n_head_kv;
  all.ffn_cells = m_.n_ff * std::max<int64_t>(1, m_.n_expert);
  all.vocab_rows = m_.n_vocab;
  const MemoryEstimate need = estimate_memory(m_, o_, all);
  uint64_t offer = 0, largest = 0;
  std::string offers;
  for (size_t i = 0; i < nodes.size(); ++i) {
    const uint64_t usable = this->usable(nodes[i], 1);
    offer += usable;
    largest = std::max(largest, usable);
    if (i < 8) offers += (i ? ", " : "") + node_name(nodes[i]) + " " + memory_text(usable);
  }
  if (nodes.size() > 8) offers += ", ...";
  const std::string needs = "the model needs " + memory_text(need.total()) + " (weights " +
                            memory_text(need.weights) + " + KV cache " +
                            memory_text(need.kv_cache) + " for " + std::to_string(o_.n_ctx) +
                            " positions x " + std::to_string(o_.n_seq) + " sequences + scratch " +
                            memory_text(need.scratch) + ")";
  const std::string headroom =
      std::to_string(static_cast<int>(std::lround(o_.memory_headroom * 100))) + "% of free memory";
  if (need.total() > offer) {
    return Error("plan", needs + " but the nodes offer " + memory_text(offer) + " (" + headroom +
                             ": " + offers + ")");
  }
  uint64_t largest_layer = 0;
  for (int64_t il = 0; il < m_.n_layer; ++il) {
    RankLoad layer = load(il, il + 1, false);
    layer.heads = m_.n_head;
    layer.kv_heads = m_.n_head_kv;
    layer.ffn_cells = all.ffn_cells;
    largest_layer = std::max(largest_layer, estimate_memory(m_, o_, layer).total());
  }
  return Error("plan", needs + " and the nodes offer " + memory_text(offer) + " in total (" +
                           headroom + ": " + offers + "), but no " + how + " of its " +
                           std::to_string(m_.n_layer) + " layers fits every node (one layer " +
                           "with its KV cache and scratch: " + memory_text(largest_layer) +
                           ", largest node: " + memory_text(largest) +
                           "); try a smaller --ctx, more nodes or another --parallel");
}

// ---------------------------------------------------------------------------------------

std::string parallel_name(const Plan& plan) {
  size_t widest = 0;
  for (const Stage& s : plan.stages) widest = std::max(widest, s.ranks.size());
  if (plan.stages.size() > 1) return widest > 1 ? "pipeline+tensor" : "pipeline";
  return widest > 1 ? "tensor" : "single";
}

std::string nodes_text(size_t n) {
  return std::to_string(n) + (n == 1 ? " node" : " nodes");
}

}  // namespace

Plan plan(const PlanModel& model, const std::vector<NodeProfile>& nodes,
          const PlanOptions& options) {
  check_input(model, nodes, options);
  const Planner planner(model, nodes, options);
  std::vector<std::string> notes;
  std::vector<int> candidates;
  for (size_t i = options.use_local ? 0 : 1; i < nodes.size(); ++i) {
    candidates.push_back(static_cast<int>(i));
  }
  if (!options.use_local) {
    notes.push_back("node '" + nodes[0].name + "' (the coordinator) holds no layers: --no-local");
  }
  if (candidates.empty()) {
    throw Error("plan",
                "no node to run the model on: --no-local leaves out the local node and "
                "there are no peers");
  }

  using Mode = PlanOptions::Mode;
  auto singles = [](const std::vector<int>& group) {
    std::vector<std::vector<int>> groups;
    for (int node : group) groups.push_back({node});
    return groups;
  };
  auto finish = [&](std::optional<Plan> plan, const std::vector<int>& used,
                    const std::string& how) {
    if (!plan) throw planner.no_fit_error(used, how);
    plan->parallel = parallel_name(*plan);
    size_t widest = 0;
    for (const Stage& s : plan->stages) widest = std::max(widest, s.ranks.size());
    if (model.moe() && widest > 1) {
      plan->moe = planner.slicing(static_cast<int64_t>(widest)).expert_parallel ? "expert-parallel"
                                                                                : "split-experts";
    }
    notes.insert(notes.end(), plan->notes.begin(), plan->notes.end());
    plan->notes = std::move(notes);
    place_ranks_on_devices(model, nodes, options, *plan);
    return std::move(*plan);
  };

  // Models whose layers tensor parallelism does not cut (PlanModel::tensor_splittable): pipeline
  // stages only.
  const bool tensor_ok = model.tensor_splittable();
  auto no_tensor = [&](const std::string& asked) {
    const char* why =
        model.layer_shapes() ? "its layers differ in shape" : "its compressed attention";
    return Error("plan", asked + ": tensor parallelism is not supported for " + model.arch + " (" +
                             why + "); use --parallel pipeline");
  };
  switch (options.mode) {
    case Mode::kPipeline:
      return finish(planner.pipeline(singles(candidates)), candidates, "pipeline split");
    case Mode::kTensor: {
      if (!tensor_ok && candidates.size() > 1) throw no_tensor("--parallel tensor");
      const std::vector<int> ranks = planner.drop_small_ranks(candidates, notes);
      return finish(planner.pipeline({ranks}), ranks, "tensor split");
    }
    case Mode::kHybrid: {
      const size_t stages = static_cast<size_t>(options.pipeline_stages);
      const size_t width = static_cast<size_t>(options.tensor_ranks);
      if (!tensor_ok && width > 1)
        throw no_tensor("--parallel ...,tensor:" + std::to_string(width));
      if (stages * width > candidates.size()) {
        throw Error("plan", "--parallel pipeline:" + std::to_string(stages) + ",tensor:" +
                                std::to_string(width) + " needs " + nodes_text(stages * width) +
                                " but only " + nodes_text(candidates.size()) + " can hold layers" +
                                (options.use_local ? "" : " (--no-local)"));
      }
      std::vector<std::vector<int>> groups(stages);
      for (size_t i = 0; i < stages * width; ++i) groups[i / width].push_back(candidates[i]);
      for (size_t i = stages * width; i < candidates.size(); ++i) {
        notes.push_back("node '" + nodes[static_cast<size_t>(candidates[i])].name +
                        "' left out: --parallel asks for " + nodes_text(stages * width));
      }
      candidates.resize(stages * width);
      return finish(planner.pipeline(groups), candidates,
                    "split into " + std::to_string(stages) + " stages of " + std::to_string(width) +
                        " ranks");
    }
    case Mode::kAuto:
      break;
  }
  if (candidates.size() == 1) {
    return finish(planner.pipeline({candidates}), candidates, "placement");
  }
  double slowest = std::numeric_limits<double>::infinity(), fastest = 0;
  for (int node : candidates) {
    slowest = std::min(slowest, nodes[static_cast<size_t>(node)].bandwidth_gbs);
    fastest = std::max(fastest, nodes[static_cast<size_t>(node)].bandwidth_gbs);
  }
  if (tensor_ok && fastest <= slowest * kSimilarBandwidth &&
      candidates.size() <= kAutoTensorMaxRanks) {
    std::vector<std::string> tensor_notes;
    const std::vector<int> ranks = planner.drop_small_ranks(candidates, tensor_notes);
    if (ranks.size() == candidates.size()) {
      if (std::optional<Plan> tensor = planner.pipeline({ranks})) {
        notes.push_back("auto: tensor parallelism across " + nodes_text(ranks.size()) +
                        " of similar bandwidth");
        return finish(std::move(tensor), ranks, "tensor split");
      }
    }
  }
  notes.push_back("auto: pipeline across " + nodes_text(candidates.size()) +
                  ", stages sized by bandwidth and memory");
  return finish(planner.pipeline(singles(candidates)), candidates, "pipeline split");
}

}  // namespace herd

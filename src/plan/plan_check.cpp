#include "plan/plan_check.h"

#include <algorithm>
#include <string>

#include "plan/device_ranks.h"
#include "plan/rank_memory.h"
#include "util/error.h"

namespace herd {
namespace {

[[noreturn]] void broken(const std::string& where, const std::string& what) {
  throw Error("plan", "plan breaks a rule: " + where + ": " + what);
}

std::string range_text(int64_t begin, int64_t end) {
  return "[" + std::to_string(begin) + ", " + std::to_string(end) + ")";
}

// Counts how many of the ranges cover each unit of [0, n); every count must be 1.
// ranges: (begin, end) pairs, already known to be ordered pairs.
void check_partition(const std::vector<std::pair<int64_t, int64_t>>& ranges, int64_t n,
                     const std::string& where, const std::string& what) {
  std::vector<int> cover(static_cast<size_t>(n) + 1, 0);  // difference array
  for (const auto& [begin, end] : ranges) {
    if (end > n)
      broken(where, what + " range " + range_text(begin, end) + " beyond " + std::to_string(n));
    ++cover[static_cast<size_t>(begin)];
    --cover[static_cast<size_t>(end)];
  }
  int count = 0;
  for (int64_t i = 0; i < n; ++i) {
    count += cover[static_cast<size_t>(i)];
    if (count != 1) {
      broken(where, what + " " + std::to_string(i) + " is owned by " + std::to_string(count) +
                        " ranks, not 1");
    }
  }
}

void check_stage(const Stage& stage, size_t index, const PlanModel& m, const PlanOptions& o,
                 const std::vector<NodeProfile>& nodes, std::vector<int>& node_uses) {
  const std::string where = "stage " + std::to_string(index);
  if (stage.ranks.empty()) broken(where, "no ranks");
  const int64_t group = m.n_head / m.n_head_kv;
  std::vector<std::pair<int64_t, int64_t>> heads, vocab;
  std::vector<std::vector<std::pair<int64_t, int64_t>>> rows(
      static_cast<size_t>(std::max<int64_t>(1, m.n_expert)));
  std::vector<int> kv_users(static_cast<size_t>(m.n_head_kv), 0);
  for (size_t r = 0; r < stage.ranks.size(); ++r) {
    const Rank& rank = stage.ranks[r];
    const std::string at = where + " rank " + std::to_string(r);
    if (rank.node < 0 || static_cast<size_t>(rank.node) >= nodes.size()) {
      broken(at, "node " + std::to_string(rank.node) + " does not exist");
    }
    if (node_uses[static_cast<size_t>(rank.node)]++ > 0) {
      broken(at, "node " + std::to_string(rank.node) + " already has a rank");
    }
    if (!o.use_local && rank.node == 0) broken(at, "node 0 has a rank under --no-local");
    if (rank.embedding != (stage.embedding && r == 0)) {
      broken(at, "only the first rank of the first stage holds the embedding");
    }
    const bool ordered = rank.head_begin <= rank.head_end &&
                         rank.kv_head_begin <= rank.kv_head_end && rank.ff_begin <= rank.ff_end &&
                         rank.vocab_begin <= rank.vocab_end && rank.head_begin >= 0 &&
                         rank.ff_begin >= 0 && rank.vocab_begin >= 0;
    if (!ordered) broken(at, "a range ends before it begins");
    heads.emplace_back(rank.head_begin, rank.head_end);
    const int64_t kv_begin = rank.head_begin / group;
    const int64_t kv_end =
        rank.head_end > rank.head_begin ? (rank.head_end + group - 1) / group : kv_begin;
    if (rank.kv_head_end - rank.kv_head_begin != kv_end - kv_begin ||
        (kv_end > kv_begin && rank.kv_head_begin != kv_begin)) {
      broken(at, "KV heads " + range_text(rank.kv_head_begin, rank.kv_head_end) +
                     " are not those its query heads read, " + range_text(kv_begin, kv_end));
    }
    for (int64_t kv = kv_begin; kv < std::min(kv_end, m.n_head_kv); ++kv)
      ++kv_users[static_cast<size_t>(kv)];
    if (m.moe()) {
      int64_t previous = -1;
      for (int64_t e : rank.experts) {
        if (e <= previous || e >= m.n_expert)
          broken(at, "experts not increasing and below n_expert");
        previous = e;
        rows[static_cast<size_t>(e)].emplace_back(rank.ff_begin, rank.ff_end);
      }
    } else {
      if (!rank.experts.empty()) broken(at, "experts in a dense model");
      rows[0].emplace_back(rank.ff_begin, rank.ff_end);
    }
    if (stage.output) {
      vocab.emplace_back(rank.vocab_begin, rank.vocab_end);
    } else if (rank.vocab_end != rank.vocab_begin) {
      broken(at, "output head rows outside the last stage");
    }
    const uint64_t memory = estimate_memory(m, o, rank_load(m, stage, rank)).total();
    if (rank.memory_bytes != memory) {
      broken(at, "memory_bytes " + std::to_string(rank.memory_bytes) + " is not the estimate " +
                     std::to_string(memory));
    }
    const uint64_t usable =
        node_capacity(nodes[static_cast<size_t>(rank.node)], o, rank_splits(stage.ranks.size()));
    if (memory > usable) {
      broken(at, "needs " + memory_text(memory) + " but node " + std::to_string(rank.node) +
                     " offers " + memory_text(usable));
    }
  }
  check_partition(heads, m.n_head, where, "query head");
  for (size_t e = 0; e < rows.size(); ++e) {
    check_partition(rows[e], m.n_ff, where,
                    m.moe() ? "row of expert " + std::to_string(e) + ": row" : "FFN row");
  }
  if (stage.output) check_partition(vocab, m.n_vocab, where, "output head row");
  std::vector<int64_t> shared;
  for (int64_t kv = 0; kv < m.n_head_kv; ++kv) {
    const int users = kv_users[static_cast<size_t>(kv)];
    if (users == 0) broken(where, "KV head " + std::to_string(kv) + " is used by no rank");
    if (users > 1) shared.push_back(kv);
  }
  if (shared != stage.shared_kv_heads)
    broken(where, "shared_kv_heads is not the KV heads held twice");
}

}  // namespace

void check_plan(const Plan& plan, const PlanModel& m, const std::vector<NodeProfile>& nodes,
                const PlanOptions& options) {
  PlanOptions o = options;
  o.n_ctx = plan.n_ctx;
  o.n_seq = plan.n_seq;
  if (plan.stages.empty()) broken("plan", "no stages");
  std::vector<int> node_uses(nodes.size(), 0);
  int64_t next_layer = 0;
  size_t widest = 0;
  for (size_t s = 0; s < plan.stages.size(); ++s) {
    const Stage& stage = plan.stages[s];
    const std::string where = "stage " + std::to_string(s);
    if (stage.layer_begin != next_layer || stage.layer_end <= stage.layer_begin ||
        stage.layer_end > m.n_layer) {
      broken(where, "layers " + range_text(stage.layer_begin, stage.layer_end) +
                        " do not continue at layer " + std::to_string(next_layer));
    }
    next_layer = stage.layer_end;
    if (stage.embedding != (s == 0)) broken(where, "the embedding belongs to the first stage");
    if (stage.output != (s + 1 == plan.stages.size())) {
      broken(where, "the output head belongs to the last stage");
    }
    widest = std::max(widest, stage.ranks.size());
    check_stage(stage, s, m, o, nodes, node_uses);
  }
  if (next_layer != m.n_layer) {
    broken("plan",
           "layers end at " + std::to_string(next_layer) + ", not " + std::to_string(m.n_layer));
  }
  const std::string parallel = plan.stages.size() > 1
                                   ? (widest > 1 ? "pipeline+tensor" : "pipeline")
                                   : (widest > 1 ? "tensor" : "single");
  if (plan.parallel != parallel)
    broken("plan", "parallel '" + plan.parallel + "' is not '" + parallel + "'");
}

}  // namespace herd

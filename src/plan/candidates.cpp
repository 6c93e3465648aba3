#include "plan/candidates.h"

#include <algorithm>
#include <cstdio>
#include <numeric>

#include "plan/planner.h"
#include "util/error.h"

namespace herd {
namespace {

constexpr size_t kMaxTensorRanks = 8;

std::string names(const std::vector<NodeProfile>& nodes, const std::vector<int>& chosen) {
  std::string text;
  for (int i : chosen)
    text += (text.empty() ? "'" : ", '") + nodes[static_cast<size_t>(i)].name + "'";
  return text;
}

}  // namespace

std::vector<Candidate> plan_candidates(const PlanModel& model,
                                       const std::vector<NodeProfile>& nodes, const Links& links,
                                       const PlanOptions& options, const PredictCosts& costs) {
  std::vector<int> usable;  // nodes that may hold layers, fastest first
  for (size_t i = options.use_local ? 0 : 1; i < nodes.size(); ++i) {
    usable.push_back(static_cast<int>(i));
  }
  std::stable_sort(usable.begin(), usable.end(), [&](int a, int b) {
    return nodes[static_cast<size_t>(a)].bandwidth_gbs >
           nodes[static_cast<size_t>(b)].bandwidth_gbs;
  });

  std::vector<Candidate> out;
  // Plans `mode` on the chosen nodes (as a node list of the coordinator and them), with
  // the ranks' node indices mapped back into `nodes`.
  const auto add = [&](const std::string& name, std::vector<int> chosen, PlanOptions o) {
    std::sort(chosen.begin(), chosen.end());
    std::vector<NodeProfile> sub = {nodes[0]};
    std::vector<int> index = {0};
    for (int i : chosen) {
      if (i == 0) continue;
      sub.push_back(nodes[static_cast<size_t>(i)]);
      index.push_back(i);
    }
    o.use_local = !chosen.empty() && chosen.front() == 0;
    Candidate c;
    c.name = name + " " + names(nodes, chosen);
    try {
      Plan p = plan(model, sub, o);
      for (Stage& s : p.stages) {
        for (Rank& r : s.ranks) r.node = index[static_cast<size_t>(r.node)];
      }
      c.prediction = predict(p, model, nodes, links, options, costs);
      c.plan = std::move(p);
    } catch (const Error& e) {
      c.why_not = e.what();
    }
    out.push_back(std::move(c));
  };
  PlanOptions pipeline = options, tensor = options;
  pipeline.mode = PlanOptions::Mode::kPipeline;
  tensor.mode = PlanOptions::Mode::kTensor;
  for (int i : usable) add("alone:", {i}, pipeline);
  for (size_t k = usable.size(); k >= 2; --k) {
    const std::vector<int> fastest(usable.begin(), usable.begin() + static_cast<std::ptrdiff_t>(k));
    add("pipeline of", fastest, pipeline);
    if (k <= kMaxTensorRanks) add("tensor of", fastest, tensor);
    for (size_t t = 2; t * 2 <= k; ++t) {
      if (k % t != 0) continue;
      PlanOptions hybrid = options;
      hybrid.mode = PlanOptions::Mode::kHybrid;
      hybrid.pipeline_stages = static_cast<int>(k / t);
      hybrid.tensor_ranks = static_cast<int>(t);
      add("pipeline:" + std::to_string(k / t) + ",tensor:" + std::to_string(t) + " of", fastest,
          hybrid);
    }
  }
  bool prefill_known = true;
  for (const Candidate& c : out) {
    prefill_known = prefill_known && (!c.plan || c.prediction.prefill_tokens_per_s > 0);
  }
  for (Candidate& c : out) {
    if (!c.plan) continue;
    c.seconds = 1 / c.prediction.decode_tokens_per_s;
    if (prefill_known) c.seconds += kPromptTokensPerReplyToken / c.prediction.prefill_tokens_per_s;
  }
  std::stable_sort(out.begin(), out.end(), [](const Candidate& a, const Candidate& b) {
    if (a.plan.has_value() != b.plan.has_value()) return a.plan.has_value();
    return a.seconds < b.seconds;
  });
  return out;
}

}  // namespace herd

namespace herd {

Plan plan_fastest(const PlanModel& model, const std::vector<NodeProfile>& nodes, const Links& links,
                  const PlanOptions& options, const PredictCosts& costs) {
  if (options.mode != PlanOptions::Mode::kAuto) return plan(model, nodes, options);
  const std::vector<Candidate> all = plan_candidates(model, nodes, links, options, costs);
  if (all.empty() || !all[0].plan) return plan(model, nodes, options);
  Plan chosen = *all[0].plan;
  size_t fit = 0;
  for (const Candidate& c : all) fit += c.plan ? 1 : 0;
  chosen.notes.push_back("auto: the fastest predicted of " + std::to_string(fit) +
                         " ways that fit: " + all[0].name + ", " +
                         prediction_text(all[0].prediction));
  const std::string why = why_fastest(all);
  if (!why.empty()) chosen.notes.push_back("auto: " + why);
  for (size_t i = options.use_local ? 0 : 1; i < nodes.size(); ++i) {
    bool used = false;
    for (const Stage& s : chosen.stages) {
      for (const Rank& r : s.ranks) used = used || r.node == static_cast<int>(i);
    }
    if (!used) {
      chosen.notes.push_back("node '" + nodes[i].name +
                             "' left out: the plans with it are predicted slower (--parallel "
                             "pipeline or tensor to split anyway)");
    }
  }
  return chosen;
}

std::string why_fastest(const std::vector<Candidate>& sorted) {
  // The next that is slower by more than 1% (equal nodes make equal candidates).
  size_t next = 1;
  while (next < sorted.size() && sorted[next].plan &&
         sorted[next].seconds < sorted[0].seconds * 1.01) {
    ++next;
  }
  if (sorted.empty() || !sorted[0].plan || next >= sorted.size() || !sorted[next].plan) return "";
  const Prediction& a = sorted[0].prediction;
  const Prediction& b = sorted[next].prediction;
  const bool prefill = a.prefill_tokens_per_s > 0 && b.prefill_tokens_per_s > 0;
  const struct Part {
    const char* what;
    double winner, other;
  } parts[] = {
      {"reading weights", a.decode_compute_seconds, b.decode_compute_seconds},
      {"all-reduces", a.decode_allreduce_seconds, b.decode_allreduce_seconds},
      {"messages between processes", a.decode_wire_seconds, b.decode_wire_seconds},
      {"prefill (4 prompt tokens)",
       prefill ? kPromptTokensPerReplyToken / a.prefill_tokens_per_s : 0,
       prefill ? kPromptTokensPerReplyToken / b.prefill_tokens_per_s : 0},
  };
  const Part* most = &parts[0];
  for (const Part& p : parts) {
    if (p.other - p.winner > most->other - most->winner) most = &p;
  }
  char text[320];
  std::snprintf(text, sizeof text,
                "%.2fx as fast as the next, %s, which spends %.2f ms per reply token on %s "
                "against %.2f ms",
                sorted[next].seconds / sorted[0].seconds, sorted[next].name.c_str(),
                most->other * 1e3, most->what, most->winner * 1e3);
  return text;
}

}  // namespace herd

#include "plan/predict.h"

#include <algorithm>
#include <cmath>
#include <cstdio>

#include "plan/device_ranks.h"
#include "plan/rank_memory.h"
#include "util/error.h"

namespace herd {

LinkProfile assumed_link() {
  LinkProfile l;
  l.rtt_seconds = 200e-6;
  l.send_bytes_per_s = 117e6;
  l.receive_bytes_per_s = 117e6;
  return l;
}

Links Links::first(size_t n) const {
  Links out;
  out.to_node.assign(to_node.begin(), to_node.begin() + static_cast<std::ptrdiff_t>(n));
  for (const auto& [pair, link] : between) {
    if (static_cast<size_t>(pair.second) < n) out.between.emplace(pair, link);
  }
  return out;
}

namespace {

const LinkProfile* between_nodes(const Links& links, int a, int b) {
  if (a == 0 || b == 0) return nullptr;
  const auto it = links.between.find({std::min(a, b), std::max(a, b)});
  return it != links.between.end() && it->second.measured ? &it->second : nullptr;
}

}  // namespace

double Links::latency(int a, int b) const {
  if (a == b) return 0;
  if (const LinkProfile* l = between_nodes(*this, a, b)) return l->rtt_seconds / 2;
  const auto rtt = [&](int n) { return to_node[static_cast<size_t>(n)].rtt_seconds; };
  if (a == 0) return rtt(b) / 2;
  if (b == 0) return rtt(a) / 2;
  return (rtt(a) + rtt(b)) / 4;  // through the switch both share with the coordinator
}

bool Links::measured(int a, int b) const {
  if (between_nodes(*this, a, b) != nullptr) return true;
  return (a == 0 || to_node[static_cast<size_t>(a)].measured) &&
         (b == 0 || to_node[static_cast<size_t>(b)].measured);
}

double Links::bandwidth(int a, int b) const {
  const auto link = [&](int n) -> const LinkProfile& { return to_node[static_cast<size_t>(n)]; };
  if (a == b) return 1e18;
  if (const LinkProfile* l = between_nodes(*this, a, b)) {
    return a < b ? l->send_bytes_per_s : l->receive_bytes_per_s;
  }
  if (a == 0) return link(b).send_bytes_per_s;
  if (b == 0) return link(a).receive_bytes_per_s;
  return std::min(link(a).receive_bytes_per_s, link(b).send_bytes_per_s);
}

namespace {

// net/ring.h's RingOptions::small_bytes: the wire size up to which a vector goes round whole.
constexpr double kRingSmallBytes = 64 << 10;

// Bytes of weights rank `rank` reads per decoded token: all it holds, but of an MoE FFN
// only the experts a token is routed to (n_expert_used of n_expert on average) and of the
// embedding one row (nothing, to this precision).
double read_bytes(const PlanModel& m, const Stage& stage, const Rank& rank) {
  const RankLoad l = rank_load(m, stage, rank);
  const int64_t cells = m.n_ff * std::max<int64_t>(1, m.n_expert);
  double ffn = static_cast<double>(slice_bytes(l.layers.ffn_bytes, l.ffn_cells, cells));
  if (m.moe()) ffn *= static_cast<double>(m.n_expert_used) / static_cast<double>(m.n_expert);
  double read = static_cast<double>(l.layers.replicated_bytes + m.global_bytes +
                                    slice_bytes(l.layers.attn_q_bytes, l.heads, m.n_head) +
                                    slice_bytes(l.layers.attn_kv_bytes, l.kv_heads, m.n_head_kv)) +
                ffn;
  if (l.output) {
    read += static_cast<double>(m.output_norm_bytes +
                                slice_bytes(m.output_bytes, l.vocab_rows, m.n_vocab));
  }
  return read;
}

class Predictor {
 public:
  Predictor(const Plan& plan, const PlanModel& m, const std::vector<NodeProfile>& nodes,
            const Links& links, const PlanOptions& o, const PredictCosts& c)
      : plan_(plan), m_(m), nodes_(nodes), links_(links), o_(o), c_(c) {
    HERD_CHECK(links.to_node.size() == nodes.size());
  }

  Prediction run() const {
    Prediction p;
    const size_t n_stages = plan_.stages.size();
    for (size_t i = 0; i < n_stages; ++i) {
      const Stage& s = plan_.stages[i];
      p.decode_compute_seconds += compute_seconds(s, 1, /*decode=*/true);
      p.decode_allreduce_seconds += allreduce_seconds(s, 1);
      p.decode_wire_seconds += input_seconds(i, 1);
    }
    p.decode_wire_seconds += logits_seconds(plan_.stages.back(), 1);
    const double token =
        p.decode_compute_seconds + p.decode_allreduce_seconds + p.decode_wire_seconds;
    p.decode_tokens_per_s = token > 0 ? 1 / token : 0;

    bool speeds_known = true;
    for (const Stage& s : plan_.stages) {
      for (const Rank& r : s.ranks) {
        speeds_known = speeds_known && nodes_[static_cast<size_t>(r.node)].matmul_gflops > 0;
      }
    }
    if (speeds_known) {
      // A prompt in chunks of the batch size; each chunk in micro-batches that overlap
      // across the stages (ClusterRunner's split_batch).
      double seconds = 0;
      for (int64_t done = 0; done < c_.prompt_tokens;) {
        const int64_t n = std::min(c_.prompt_tokens - done, int64_t{256});
        int64_t piece = n;
        if (n_stages > 1) {
          piece = n >= 64
                      ? std::max<int64_t>(16, (n + 4 * static_cast<int64_t>(n_stages) - 1) /
                                                  (4 * static_cast<int64_t>(n_stages)))
                      : (n + static_cast<int64_t>(n_stages) - 1) / static_cast<int64_t>(n_stages);
        }
        const double k = static_cast<double>(piece);
        const double pieces = std::ceil(static_cast<double>(n) / k);
        double sum = 0, slowest = 0;
        for (size_t i = 0; i < n_stages; ++i) {
          const Stage& s = plan_.stages[i];
          const double t =
              compute_seconds(s, k, false) + allreduce_seconds(s, k) + input_seconds(i, k);
          sum += t;
          slowest = std::max(slowest, t);
        }
        seconds += sum + (pieces - 1) * slowest + logits_seconds(plan_.stages.back(), 1);
        done += n;
      }
      p.prefill_tokens_per_s = static_cast<double>(c_.prompt_tokens) / seconds;
    }
    return p;
  }

 private:
  const NodeProfile& node(int i) const { return nodes_[static_cast<size_t>(i)]; }

  // The slowest rank's time for `tokens` tokens: weights read (decode) or matrix work
  // (prefill: its share of the stage's bytes is taken as its share of the work).
  double compute_seconds(const Stage& s, double tokens, bool decode) const {
    double total_read = 0;
    std::vector<double> reads;
    for (const Rank& r : s.ranks) {
      reads.push_back(read_bytes(m_, s, r));
      total_read += reads.back();
    }
    double slowest = 0;
    for (size_t k = 0; k < s.ranks.size(); ++k) {
      const NodeProfile& n = node(s.ranks[k].node);
      double t;
      if (decode) {
        // A GPU's share at its bandwidth (device_ranks.h).
        t = node_read_seconds(n, reads[k], o_, rank_splits(s.ranks.size())) / c_.decode_efficiency;
      } else {
        const double flops = m_.layer_flops_per_token() *
                             static_cast<double>(s.layer_end - s.layer_begin) *
                             (reads[k] / total_read) * tokens;
        t = flops / (n.matmul_gflops * 1e9 * c_.prefill_efficiency);
      }
      slowest = std::max(slowest, t);
    }
    return slowest;
  }

  // One message of `bytes` from node a to node b. A measured round trip already holds
  // the fixed costs of the two messages it took (the processes woke to answer).
  double message(int a, int b, double bytes) const {
    if (a == b) return 0;
    return links_.latency(a, b) + bytes / links_.bandwidth(a, b) +
           (links_.measured(a, b) ? 0 : c_.message_seconds);
  }

  // Two ring all-reduces of the hidden states per layer, as net/ring.h runs them: a
  // vector of up to 64 KiB goes round whole (T - 1 steps, each rank sending it to the
  // next: decode), a larger one by reduce-scatter and all-gather (2 (T - 1) steps of 1/T
  // of it: prefill). A step lasts as long as its slowest link.
  double allreduce_seconds(const Stage& s, double tokens) const {
    const size_t t = s.ranks.size();
    if (t < 2) return 0;
    const double bytes = tokens * static_cast<double>(m_.n_embd) * c_.wire_bytes_per_value;
    const bool whole = bytes <= kRingSmallBytes;
    const double chunk = whole ? bytes : bytes / static_cast<double>(t);
    double step = 0;
    for (size_t r = 0; r < t; ++r) {
      step = std::max(step, message(s.ranks[r].node, s.ranks[(r + 1) % t].node, chunk));
    }
    step += c_.ring_step_seconds;
    const double steps = static_cast<double>(t - 1) * (whole ? 1 : 2);
    return 2 * static_cast<double>(s.layer_end - s.layer_begin) * steps * step;
  }

  static bool all_remote(const Stage& s) {
    return std::all_of(s.ranks.begin(), s.ranks.end(), [](const Rank& r) { return r.node != 0; });
  }

  // Getting stage i its input for `tokens` tokens: token ids from the coordinator to the
  // first stage; hidden states from the previous stage, straight or through the
  // coordinator. Sends to the ranks of a stage go out in parallel.
  double input_seconds(size_t i, double tokens) const {
    const Stage& s = plan_.stages[i];
    if (i == 0) {
      double t = 0;
      for (const Rank& r : s.ranks) t = std::max(t, message(0, r.node, 13 * tokens));
      return t;
    }
    const Stage& prev = plan_.stages[i - 1];
    const double hidden = tokens * static_cast<double>(m_.n_embd) * c_.wire_bytes_per_value;
    const int from = prev.ranks[0].node;  // rank 0 passes a tensor-parallel stage's output on
    double t = 0;
    if (c_.stage_links && all_remote(prev) && all_remote(s)) {
      for (const Rank& r : s.ranks) t = std::max(t, message(from, r.node, hidden));
      return t;
    }
    const double back = message(from, 0, hidden);
    for (const Rank& r : s.ranks) t = std::max(t, message(0, r.node, hidden));
    return back + t;
  }

  // The last stage's logits for `tokens` tokens to the coordinator: each rank its rows.
  double logits_seconds(const Stage& s, double tokens) const {
    double t = 0;
    for (const Rank& r : s.ranks) {
      const double rows = static_cast<double>(r.vocab_end - r.vocab_begin);
      t = std::max(t, message(r.node, 0, tokens * rows * 4));
    }
    return t;
  }

  const Plan& plan_;
  const PlanModel& m_;
  const std::vector<NodeProfile>& nodes_;
  const Links& links_;
  const PlanOptions& o_;
  const PredictCosts& c_;
};

std::string ms(double seconds) {
  char text[32];
  std::snprintf(text, sizeof text, "%.2f ms", seconds * 1e3);
  return text;
}

}  // namespace

Prediction predict(const Plan& plan, const PlanModel& model, const std::vector<NodeProfile>& nodes,
                   const Links& links, const PlanOptions& options, const PredictCosts& costs) {
  HERD_CHECK(!plan.stages.empty());
  return Predictor(plan, model, nodes, links, options, costs).run();
}

std::string prediction_text(const Prediction& p) {
  char text[96];
  std::snprintf(text, sizeof text, "%.1f tok/s decode (", p.decode_tokens_per_s);
  std::string out = text;
  out += "weights " + ms(p.decode_compute_seconds);
  if (p.decode_allreduce_seconds > 0) out += ", all-reduce " + ms(p.decode_allreduce_seconds);
  out += ", wire " + ms(p.decode_wire_seconds) + ")";
  if (p.prefill_tokens_per_s > 0) {
    std::snprintf(text, sizeof text, ", %.0f tok/s prefill", p.prefill_tokens_per_s);
    out += text;
  } else {
    out += ", prefill unknown (no matmul speed)";
  }
  return out;
}

}  // namespace herd

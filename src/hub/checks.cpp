#include "hub/checks.h"

#include <algorithm>
#include <cmath>
#include <cstdio>

#include "util/error.h"

namespace herd::hub {
namespace {

// A number field of a checker's answer, or `otherwise` (answers are bytes from the network).
double number_or(const nlohmann::json& object, const char* field, double otherwise) {
  const auto it = object.find(field);
  return it != object.end() && it->is_number() ? it->get<double>() : otherwise;
}

}  // namespace

Verdict judge(const nlohmann::json& answer, size_t served, const CheckThresholds& thresholds) {
  auto unreadable = [](const std::string& why) {
    return Error("hub", "check: the checker's answer " + why);
  };
  if (answer.is_object() && answer.contains("unscorable")) {
    Verdict v;
    v.tokens = static_cast<int64_t>(served);
    v.implausible = v.tokens;
    v.detail = answer["unscorable"].is_string()
                   ? "the ids cannot be scored: " + answer["unscorable"].get<std::string>()
                   : "the ids cannot be scored";
    return v;
  }
  if (!answer.is_object() || !answer.contains("scores") || !answer["scores"].is_array()) {
    throw unreadable("has no 'scores' array");
  }
  if (!answer.contains("temperature") || !answer["temperature"].is_number()) {
    throw unreadable("has no 'temperature'");
  }
  const nlohmann::json& scores = answer["scores"];
  if (scores.size() != served) {
    throw unreadable("scores " + std::to_string(scores.size()) + " tokens of " +
                     std::to_string(served));
  }
  const bool greedy = answer["temperature"].get<double>() <= 0;
  Verdict v;
  double surprise = 0, variance = 0;  // sum(log p + entropy), sum(variance)
  for (size_t i = 0; i < scores.size(); ++i) {
    const nlohmann::json& s = scores[i];
    if (!s.is_object() || !s.contains("probability") || !s["probability"].is_number() ||
        !s.contains("gap") || !s["gap"].is_number()) {
      throw unreadable("has a score without 'probability' and 'gap'");
    }
    const double probability = s["probability"].get<double>();
    const double gap = s["gap"].get<double>();
    ++v.tokens;
    if (greedy) {
      v.max_gap = std::max(v.max_gap, gap);
    } else {
      v.min_probability = std::min(v.min_probability, probability);
      const double entropy = number_or(s, "entropy", 0), spread = number_or(s, "variance", 0);
      surprise += std::log(std::max(probability, 1e-300)) + entropy;
      variance += spread + kNoise;
    }
    const bool plausible =
        greedy ? gap <= thresholds.greedy_gap : probability >= thresholds.min_probability;
    if (plausible) continue;
    if (++v.implausible == 1) {
      char line[160];
      std::snprintf(line, sizeof line, "token %zu (id %lld): %s %.3g", i,
                    static_cast<long long>(number_or(s, "token", -1)),
                    greedy ? "logit below the best by" : "probability", greedy ? gap : probability);
      v.detail = line;
    }
  }
  if (!greedy && variance > 0) {
    v.z = surprise / std::sqrt(variance);
    if (v.z < thresholds.min_z) {
      char line[160];
      std::snprintf(line, sizeof line,
                    "the %lld tokens are less likely than honest draws: z = %.1f (at least %.1f)",
                    static_cast<long long>(v.tokens), v.z, thresholds.min_z);
      if (v.detail.empty()) v.detail = line;
      v.implausible = std::max<int64_t>(v.implausible, 1);
    }
  }
  v.passed = v.implausible == 0;
  v.conclusive = !v.passed || greedy || v.tokens >= thresholds.min_sampled_tokens;
  return v;
}

bool should_check(int64_t checked, double sample_rate, double draw) {
  return checked < kAlwaysChecked || draw < sample_rate;
}

namespace {

std::string_view trimmed(std::string_view s) {
  const auto space = [](char c) { return c == ' ' || c == '\n' || c == '\t' || c == '\r'; };
  while (!s.empty() && space(s.front())) s.remove_prefix(1);
  while (!s.empty() && space(s.back())) s.remove_suffix(1);
  return s;
}

}  // namespace

std::string text_mismatch(const std::string& sent, const nlohmann::json& answer) {
  if (!answer.is_object() || !answer.contains("content") || !answer["content"].is_string()) {
    return "";  // a checker that does not render the text: nothing to compare
  }
  const std::string& rendered = answer["content"].get_ref<const std::string&>();
  if (trimmed(sent) == trimmed(rendered)) return "";
  auto quoted = [](std::string_view s) {
    std::string out(s.substr(0, 60));
    return "'" + out + (s.size() > 60 ? "...'" : "'");
  };
  return "the text sent (" + std::to_string(sent.size()) + " bytes, " + quoted(trimmed(sent)) +
         ") is not the ids' text (" + std::to_string(rendered.size()) + " bytes, " +
         quoted(trimmed(rendered)) + ")";
}

double reputation_of(const PodCounts& c, bool seed) {
  double r =
      seed ? 1.0 : std::min(1.0, kNewReputation + kReputationGain * static_cast<double>(c.passed));
  r *= std::pow(kReputationLoss, static_cast<double>(c.failed));
  r *= std::pow(kOverruledLoss, static_cast<double>(c.overruled));
  return r;
}

bool may_check(const PodCounts& c, bool seed) {
  if (c.failed > 0 || reputation_of(c, seed) < kMinCheckerReputation) return false;
  return seed || c.qualified_passes > 0;
}

bool wants_another(std::span<const Vote> votes, bool confirm_pass) {
  if (votes.size() == 1) return !votes[0].passed || confirm_pass;
  if (votes.size() == 2) return votes[0].passed != votes[1].passed;
  return false;
}

Decision decide(std::span<const Vote> votes) {
  Decision d;
  if (votes.empty()) return d;
  d.decided = true;
  size_t passes = 0;
  for (const Vote& v : votes) passes += v.passed ? 1 : 0;
  const size_t fails = votes.size() - passes;
  d.passed = passes >= fails;
  if (passes != fails && std::min(passes, fails) > 0) {
    for (const Vote& v : votes) {
      if (v.passed != d.passed) d.overruled.push_back(v.checker);
    }
  }
  return d;
}

}  // namespace herd::hub

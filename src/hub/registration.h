// What a machine or pod tells the hub when it joins (`herd serve --hub URL`, issue 19): its
// identity, where its OpenAI-compatible API answers, the models it serves and how fast,
// signed with its node identity (net/identity.h, Ed25519) so that nobody can register in its
// name or change its figures on the way.
//
// The body is JSON (at most 64 KiB):
//   {"id": "<43-char node id>", "name": "studio-pod", "url": "http://10.0.0.5:8080",
//    "models": [{"name": "llama-3.1-8b-q4_0", "n_ctx": 8192}],
//    "slots": 4, "decode_tokens_per_s": 31.5, "prefill_tokens_per_s": 640.0,
//    "memory_bytes": 68719476736, "time_ms": 1764672000000,
//    "loadable": ["qwen3-8b-q4_0", "llama-3.1-8b-q4_0"]}
// "loadable" (optional; absent: none) names the models the pod could load when the hub asks
// (`herd serve --models-dir`, POST /api/load): at most 64, each checked as a model's name,
// no repeats; it may name a model the pod serves.
// and the signature, sent beside it (header X-Herd-Signature), is Ed25519 over
// "herd-registration-v1\n" followed by the body's exact bytes, in URL-safe base64 without
// padding. time_ms (the pod's clock) must be within `max_skew_ms` of the hub's, so an old
// registration cannot be replayed later.
//
// Every field from the network is checked before use; errors name the field:
//   herd::Error("hub", "registration: field 'slots': 0 is not in 1..4096").
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "net/identity.h"

namespace herd::hub {

inline constexpr size_t kMaxRegistrationBytes = 64 << 10;

struct ServedModel {
  std::string name;   // 1-256 printable bytes
  int64_t n_ctx = 0;  // 1..2^24
};

struct Registration {
  net::NodeId id;
  std::string name;                   // 1-128 printable bytes
  std::string url;                    // scheme://host[:port] (pod_address.h), at most 2048 bytes
  std::vector<ServedModel> models;    // 1-64
  int32_t slots = 1;                  // 1..4096
  double decode_tokens_per_s = 0;     // (0, 1e6]
  double prefill_tokens_per_s = 0;    // (0, 1e7]
  uint64_t memory_bytes = 0;          // at most 2^50
  int64_t time_ms = 0;                // the pod's clock, Unix milliseconds
  std::vector<std::string> loadable;  // 0-64 model names (1-256 printable bytes), no repeats
};

// The body a pod sends (compact JSON of the fields above).
std::string registration_body(const Registration& r);
// The signature text for a body.
std::string sign_registration(const net::NodeIdentity& identity, std::string_view body);

// Parses and checks a body (no signature check: verify_registration does both).
Registration parse_registration(std::string_view body);
// Parses, checks the signature against the id the body names, and that time_ms is within
// max_skew_ms of now_ms. Throws herd::Error("hub", "registration: ...") otherwise.
Registration verify_registration(std::string_view body, std::string_view signature, int64_t now_ms,
                                 int64_t max_skew_ms = 5 * 60 * 1000);

}  // namespace herd::hub

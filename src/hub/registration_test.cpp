#include "hub/registration.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "util/error.h"

namespace herd::hub {
namespace {

using ::testing::HasSubstr;
using ::testing::ThrowsMessage;

constexpr int64_t kNow = 1764672000000;  // 2025-12-02, the pod's clock and the hub's

Registration sample(const net::NodeIdentity& identity) {
  Registration r;
  r.id = identity.id();
  r.name = "studio-pod";
  r.url = "http://10.0.0.5:8080";
  r.models = {{"llama-3.1-8b-q4_0", 8192}, {"qwen3-30b-a3b", 32768}};
  r.slots = 4;
  r.decode_tokens_per_s = 31.5;
  r.prefill_tokens_per_s = 640;
  r.memory_bytes = uint64_t{64} << 30;
  r.time_ms = kNow;
  return r;
}

TEST(RegistrationTest, ASignedBodyVerifiesWithEveryField) {
  const net::NodeIdentity pod = net::NodeIdentity::generate();
  const std::string body = registration_body(sample(pod));
  const Registration r = verify_registration(body, sign_registration(pod, body), kNow + 1000);
  EXPECT_EQ(r.id, pod.id());
  EXPECT_EQ(r.name, "studio-pod");
  EXPECT_EQ(r.url, "http://10.0.0.5:8080");
  ASSERT_EQ(r.models.size(), 2u);
  EXPECT_EQ(r.models[1].name, "qwen3-30b-a3b");
  EXPECT_EQ(r.models[1].n_ctx, 32768);
  EXPECT_EQ(r.slots, 4);
  EXPECT_EQ(r.decode_tokens_per_s, 31.5);
  EXPECT_EQ(r.prefill_tokens_per_s, 640);
  EXPECT_EQ(r.memory_bytes, uint64_t{64} << 30);
  EXPECT_EQ(r.time_ms, kNow);
}

TEST(RegistrationTest, LoadableModelsAreOptionalAndSigned) {
  const net::NodeIdentity pod = net::NodeIdentity::generate();
  Registration r = sample(pod);
  std::string body = registration_body(r);
  EXPECT_EQ(body.find("loadable"), std::string::npos);  // none: absent, as before the field
  EXPECT_TRUE(verify_registration(body, sign_registration(pod, body), kNow).loadable.empty());

  r.loadable = {"qwen3-8b-q4_0", "llama-3.1-8b-q4_0"};  // may name a served model
  body = registration_body(r);
  const Registration back = verify_registration(body, sign_registration(pod, body), kNow);
  EXPECT_EQ(back.loadable, r.loadable);
  // Signed like every field: another list does not verify with the first one's signature.
  nlohmann::json changed = nlohmann::json::parse(body);
  changed["loadable"].push_back("gpt-oss-120b");
  EXPECT_THROW(verify_registration(changed.dump(), sign_registration(pod, body), kNow), Error);
  changed["loadable"] = nlohmann::json::array();  // empty: accepted, none
  EXPECT_TRUE(parse_registration(changed.dump()).loadable.empty());
}

TEST(RegistrationTest, ForgedTamperedAndReplayedRegistrationsAreRefused) {
  const net::NodeIdentity pod = net::NodeIdentity::generate();
  const net::NodeIdentity other = net::NodeIdentity::generate();
  const std::string body = registration_body(sample(pod));
  const std::string signature = sign_registration(pod, body);
  // Another's key signed it: it cannot register in the pod's name.
  EXPECT_THAT([&] { verify_registration(body, sign_registration(other, body), kNow); },
              ThrowsMessage<Error>(HasSubstr("the signature is not " + pod.id().to_text())));
  // Its figures changed on the way.
  std::string tampered = body;
  tampered.replace(tampered.find("\"slots\":4"), 9, "\"slots\":8");
  EXPECT_THAT([&] { verify_registration(tampered, signature, kNow); },
              ThrowsMessage<Error>(HasSubstr("the signature is not")));
  // An old registration sent again ten minutes later.
  EXPECT_THAT([&] { verify_registration(body, signature, kNow + 10 * 60 * 1000); },
              ThrowsMessage<Error>(HasSubstr("600 s from the hub's")));
  for (const std::string& garbage :
       {std::string(""), std::string("!!"), std::string(200, 'A'), signature.substr(0, 85)}) {
    EXPECT_THAT([&] { verify_registration(body, garbage, kNow); },
                ThrowsMessage<Error>(HasSubstr("not 64 bytes of URL-safe base64")));
  }
}

TEST(RegistrationTest, EveryBadFieldIsNamed) {
  const net::NodeIdentity pod = net::NodeIdentity::generate();
  const nlohmann::json good = nlohmann::json::parse(registration_body(sample(pod)));
  const auto refused = [&](const std::function<void(nlohmann::json&)>& change,
                           const std::string& needle) {
    nlohmann::json j = good;
    change(j);
    EXPECT_THAT([&] { parse_registration(j.dump()); }, ThrowsMessage<Error>(HasSubstr(needle)))
        << j.dump();
  };
  refused([](auto& j) { j.erase("id"); }, "field 'id': missing");
  refused([](auto& j) { j["id"] = "short"; }, "is not a node id");
  refused([](auto& j) { j["name"] = ""; }, "field 'name': 0 bytes");
  refused([](auto& j) { j["name"] = "a\nb"; }, "field 'name': holds a control character");
  refused([](auto& j) { j["url"] = "ftp://x"; }, "field 'url': not http:// or https://");
  refused([](auto& j) { j["url"] = "http://x y"; },
          "field 'url': holds a control character or space");
  refused([](auto& j) { j["models"] = nlohmann::json::array(); }, "field 'models': 0 models");
  refused([](auto& j) { j["models"][1]["name"] = j["models"][0]["name"]; }, "twice");
  refused([](auto& j) { j["models"][0]["n_ctx"] = 0; }, "field 'n_ctx': 0 is not in 1..");
  refused([](auto& j) { j["models"][0] = 7; }, "an entry is not an object");
  refused([](auto& j) { j["slots"] = 0; }, "field 'slots': 0 is not in 1..4096");
  refused([](auto& j) { j["slots"] = "4"; }, "field 'slots': not an integer");
  refused([](auto& j) { j["decode_tokens_per_s"] = -1; }, "field 'decode_tokens_per_s': not in");
  refused([](auto& j) { j["prefill_tokens_per_s"] = 1e30; }, "field 'prefill_tokens_per_s'");
  refused([](auto& j) { j["memory_bytes"] = 18446744073709551615ull; }, "field 'memory_bytes'");
  refused([](auto& j) { j["time_ms"] = -5; }, "field 'time_ms'");
  refused([](auto& j) { j["loadable"] = "qwen3"; }, "field 'loadable': not an array");
  refused([](auto& j) { j["loadable"] = {"a", 7}; }, "field 'loadable': not a string");
  refused([](auto& j) { j["loadable"] = {""}; }, "field 'loadable': 0 bytes");
  refused([](auto& j) { j["loadable"] = {"a\tb"}; }, "field 'loadable': holds a control");
  refused([](auto& j) { j["loadable"] = {std::string(257, 'x')}; }, "field 'loadable': 257 bytes");
  refused([](auto& j) { j["loadable"] = {"a", "b", "a"}; }, "field 'loadable': 'a' twice");
  refused(
      [](auto& j) {
        j["loadable"] = nlohmann::json::array();
        for (int i = 0; i < 65; ++i) j["loadable"].push_back("m" + std::to_string(i));
      },
      "field 'loadable': 65 models (at most 64)");
  EXPECT_THAT([] { parse_registration("{\"id\": "); },
              ThrowsMessage<Error>(HasSubstr("registration: not JSON")));
  EXPECT_THAT([] { parse_registration("[1, 2]"); },
              ThrowsMessage<Error>(HasSubstr("not a JSON object")));
  EXPECT_THAT([] { parse_registration(std::string(kMaxRegistrationBytes + 1, ' ')); },
              ThrowsMessage<Error>(HasSubstr("is more than 65536")));
}

}  // namespace
}  // namespace herd::hub

#include "net/discovery.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "util/error.h"

namespace herd::net {
namespace {

using ::testing::HasSubstr;

std::vector<uint8_t> record(std::initializer_list<std::string_view> strings) {
  std::vector<uint8_t> out;
  for (std::string_view s : strings) {
    out.push_back(static_cast<uint8_t>(s.size()));
    out.insert(out.end(), s.begin(), s.end());
  }
  return out;
}

std::string decode_error(const std::vector<uint8_t>& txt) {
  try {
    decode_txt(txt);
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

NodeAdvert sample() {
  NodeAdvert a;
  a.name = "mini-2:7070";
  a.cluster = "0123456789abcdef";
  a.cores = 10;
  a.free_memory_bytes = 17179869184;
  a.bandwidth_gbs = 102.5;
  a.models = {"00112233445566aa", "ffeeddccbbaa9988"};
  a.n_models = 2;
  a.id = NodeIdentity::generate().id().to_text();
  return a;
}

TEST(ClusterId, DerivedFromTheKeyAndNotTheKey) {
  const ClusterKey a = ClusterKey::from_text(std::string(64, 'a'), "a");
  const ClusterKey a2 = ClusterKey::from_text(std::string(64, 'a'), "a2");
  const ClusterKey b = ClusterKey::from_text(std::string(64, 'b'), "b");
  const std::string id = cluster_id(&a);
  EXPECT_EQ(id.size(), 16u);
  EXPECT_EQ(id.find_first_not_of("0123456789abcdef"), std::string::npos);
  EXPECT_EQ(id, cluster_id(&a2));
  EXPECT_NE(id, cluster_id(&b));
  EXPECT_EQ(cluster_id(nullptr), "none");
  // Not a prefix of the key's bytes in hex (the key is 0xaa...).
  EXPECT_NE(id, std::string(16, 'a'));
}

TEST(ClusterId, LongAndShortKeys) {
  const ClusterKey small = ClusterKey::from_text("0123456789abcdef", "16 bytes");
  const ClusterKey big = ClusterKey::from_text(std::string(300, 'x'), "300 bytes");
  EXPECT_EQ(cluster_id(&small).size(), 16u);
  EXPECT_EQ(cluster_id(&big).size(), 16u);
  EXPECT_NE(cluster_id(&small), cluster_id(&big));
}

TEST(Txt, RoundTrip) {
  const NodeAdvert a = sample();
  EXPECT_EQ(decode_txt(encode_txt(a)), a);
  NodeAdvert none = a;
  none.cluster = "none";
  none.models.clear();
  none.n_models = 0;
  none.bandwidth_gbs = 0;
  none.id.clear();  // a node that does not say its id (an older one)
  EXPECT_EQ(decode_txt(encode_txt(none)), none);
}

TEST(Txt, EveryStringFitsAndTheModelListIsCut) {
  NodeAdvert a = sample();
  a.models.clear();
  for (int i = 0; i < 40; ++i) {
    char h[17];
    std::snprintf(h, sizeof h, "%016x", i);
    a.models.push_back(h);
  }
  a.n_models = 40;
  a.name = std::string(300, 'n');
  const std::vector<uint8_t> txt = encode_txt(a);
  for (size_t at = 0; at < txt.size(); at += 1 + txt[at]) ASSERT_LE(at + 1 + txt[at], txt.size());
  const NodeAdvert back = decode_txt(txt);
  // "models=" + 14 hashes of 16 and 13 commas = 244 bytes; a 15th would pass 255.
  EXPECT_EQ(back.models.size(), 14u);
  EXPECT_EQ(back.models.front(), a.models.front());
  EXPECT_EQ(back.n_models, 40u);
  EXPECT_EQ(back.name, std::string(kMaxNodeNameBytes, 'n'));
}

TEST(Txt, KeysAreCaseInsensitiveFirstWinsUnknownIgnored) {
  const NodeAdvert a = decode_txt(record({"V=1", "Name=x", "name=y", "cluster=none", "future=1",
                                          "flag", "", "cores=4", "bw=12.25", "mem=5"}));
  EXPECT_EQ(a.version, 1u);
  EXPECT_EQ(a.name, "x");
  EXPECT_EQ(a.cores, 4);
  EXPECT_DOUBLE_EQ(a.bandwidth_gbs, 12.25);
  EXPECT_EQ(a.free_memory_bytes, 5u);
}

TEST(Txt, HostileRecordsAreErrors) {
  EXPECT_THAT(decode_error({10, 'v', '=', '1'}), HasSubstr("overruns"));
  EXPECT_THAT(decode_error(record({"name=x", "cluster=none"})), HasSubstr("no version"));
  EXPECT_THAT(decode_error(record({"v=1", "cluster=none"})), HasSubstr("no name"));
  EXPECT_THAT(decode_error(record({"v=1", "name=x"})), HasSubstr("no cluster"));
  EXPECT_THAT(decode_error(record({"v=1", "name=x", "cluster=12"})), HasSubstr("cluster"));
  EXPECT_THAT(decode_error(record({"v=1", "name=a\nb", "cluster=none"})), HasSubstr("name"));
  EXPECT_THAT(decode_error(record({"v=99999", "name=x", "cluster=none"})), HasSubstr("range"));
  EXPECT_THAT(decode_error(record({"v=1", "name=x", "cluster=none", "cores=2000000"})),
              HasSubstr("cores"));
  EXPECT_THAT(decode_error(record({"v=1", "name=x", "cluster=none", "mem=-1"})), HasSubstr("mem"));
  EXPECT_THAT(decode_error(record({"v=1", "name=x", "cluster=none", "mem=99999999999999999999"})),
              HasSubstr("mem"));
  EXPECT_THAT(decode_error(record({"v=1", "name=x", "cluster=none", "bw=1.2.3"})), HasSubstr("bw"));
  EXPECT_THAT(decode_error(record({"v=1", "name=x", "cluster=none", "models=abc"})),
              HasSubstr("models"));
  EXPECT_THAT(decode_error(record({"v=1", "name=x", "cluster=none", "=1"})), HasSubstr("key"));
  EXPECT_THAT(decode_error(record({"v=1", "name=x", "cluster=none", "id=not-an-id"})),
              HasSubstr("id is not a node id"));
}

}  // namespace
}  // namespace herd::net

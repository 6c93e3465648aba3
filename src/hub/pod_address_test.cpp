#include "hub/pod_address.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "util/error.h"

namespace herd::hub {
namespace {

using ::testing::HasSubstr;

void refused(const std::string& url, const std::string& why) {
  try {
    parse_pod_url(url);
    ADD_FAILURE() << url << " was accepted";
  } catch (const Error& e) {
    EXPECT_THAT(e.what(), HasSubstr("field 'url': ")) << url;
    EXPECT_THAT(e.what(), HasSubstr(why)) << url;
  }
}

TEST(PodAddressTest, AUrlIsSchemeHostAndPortOnly) {
  PodAddress a = parse_pod_url("http://10.0.0.5:8080");
  EXPECT_EQ(a.scheme, "http");
  EXPECT_EQ(a.host, "10.0.0.5");
  EXPECT_EQ(a.port, 8080);
  EXPECT_EQ(a.base_url(), "http://10.0.0.5:8080");
  a = parse_pod_url("https://pod.example.org/");
  EXPECT_EQ(a.port, 443);
  EXPECT_EQ(a.base_url(), "https://pod.example.org:443");
  a = parse_pod_url("http://[2001:4860::8888]:9");
  EXPECT_EQ(a.host, "2001:4860::8888");
  EXPECT_EQ(a.base_url(), "http://[2001:4860::8888]:9");
  EXPECT_EQ(parse_pod_url("http://h").port, 80);
  EXPECT_EQ(parse_pod_url("http://h:65535").port, 65535);

  // The port that made the prober throw (issue 28), and its neighbours.
  refused("http://127.0.0.1:99999999999", "port '99999999999' is not in 1..65535");
  refused("http://h:65536", "port '65536' is not in 1..65535");
  refused("http://h:0", "port '0' is not in 1..65535");
  refused("http://h:-1", "port '-1' is not in 1..65535");
  refused("http://h:8o", "port '8o' is not in 1..65535");
  refused("http://h:", "an empty port");
  refused("ftp://h", "not http:// or https://");
  refused("http://", "a host of 0 bytes");
  refused("http://:80", "a host of 0 bytes");
  refused("http://user@h:80", "a user name");
  refused("http://h:80/v1", "without a path");
  refused("http://h:80?x", "without a path");
  refused("http://h%2f:80", "holds '%'");
  refused("http://[::1", "without its ']'");
  refused("http://[::1]x", "after the IPv6 address");
  refused("http://[not:an:address]:1", "is not an IPv6 address");
}

TEST(PodAddressTest, OnlyPublicAddressesArePublic) {
  for (const char* ip : {"0.0.0.0",
                         "0.1.2.3",
                         "10.0.0.5",
                         "100.64.0.1",
                         "100.127.255.255",
                         "127.0.0.1",
                         "127.255.0.1",
                         "169.254.169.254",
                         "172.16.0.1",
                         "172.31.255.255",
                         "192.0.0.8",
                         "192.0.2.1",
                         "192.168.1.1",
                         "198.18.0.1",
                         "198.51.100.7",
                         "203.0.113.9",
                         "224.0.0.1",
                         "239.1.2.3",
                         "240.0.0.1",
                         "255.255.255.255",
                         "::",
                         "::1",
                         "::ffff:127.0.0.1",
                         "::ffff:10.1.2.3",
                         "::ffff:169.254.169.254",
                         "::127.0.0.1",
                         "64:ff9b::10.0.0.1",
                         "2002:c0a8:0101::1",
                         "fc00::1",
                         "fd12:3456::1",
                         "fe80::1",
                         "fec0::1",
                         "ff02::1",
                         "2001::1",
                         "2001:db8::1",
                         "2001:10::1",
                         "100::1",
                         "not an address",
                         ""}) {
    EXPECT_FALSE(is_public_ip(ip)) << ip;
  }
  for (const char* ip :
       {"8.8.8.8", "1.1.1.1", "100.63.255.255", "100.128.0.1", "172.15.0.1", "172.32.0.1",
        "192.169.0.1", "169.253.0.1", "223.255.255.254", "2001:4860:4860::8888", "2606:4700::1111",
        "::ffff:8.8.8.8", "64:ff9b::8.8.8.8", "2002:0808:0808::1"}) {
    EXPECT_TRUE(is_public_ip(ip)) << ip;
  }
}

TEST(PodAddressTest, TheAddressPinnedIsOneCheckedAndIPv4First) {
  PodAddress a = parse_pod_url("http://pod.example.org:8080");
  pin_pod_address(a, {"2606:4700::1111", "8.8.8.8"}, false);
  EXPECT_EQ(a.ip, "8.8.8.8");
  // One private address among the host's is enough to refuse it (the client would try it).
  try {
    pin_pod_address(a, {"8.8.8.8", "10.0.0.1"}, false);
    ADD_FAILURE() << "a private address was pinned";
  } catch (const Error& e) {
    EXPECT_THAT(e.what(), HasSubstr("host 'pod.example.org' is at 10.0.0.1, not a public"));
    EXPECT_THAT(e.what(), HasSubstr("--allow-private-pods"));
  }
  pin_pod_address(a, {"::1", "127.0.0.1"}, true);
  EXPECT_EQ(a.ip, "127.0.0.1");
}

TEST(PodAddressTest, HostsResolveAndNumbersResolveToThemselves) {
  EXPECT_EQ(resolve_host("127.0.0.1"), std::vector<std::string>{"127.0.0.1"});
  EXPECT_EQ(resolve_host("::1"), std::vector<std::string>{"::1"});
  // Another spelling of loopback resolves to it, so it is refused as loopback.
  const auto odd = resolve_host("2130706433");
  ASSERT_FALSE(odd.empty());
  EXPECT_EQ(odd.front(), "127.0.0.1");
  EXPECT_FALSE(resolve_host("localhost").empty());  // /etc/hosts: no DNS asked
}

}  // namespace
}  // namespace herd::hub

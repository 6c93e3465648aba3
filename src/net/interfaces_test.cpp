#include "net/interfaces.h"

#include <gtest/gtest.h>

namespace herd::net {
namespace {

// A Mac mini on a Thunderbolt cable and Wi-Fi, as getifaddrs lists it.
std::vector<NetInterface> mac_mini() {
  return {{"lo0", "127.0.0.1", false, true, 0},
          {"lo0", "::1", true, true, 0},
          {"en0", "192.168.1.20", false, false, 0},
          {"en0", "fe80::1c2b:3aff:fe4d:5e6f", true, false, 0},
          {"bridge0", "169.254.20.1", false, false, 0}};
}

TEST(Interfaces, AnyAddressMeansEveryInterfaceOfItsFamily) {
  const std::vector<NetInterface> all = mac_mini();
  EXPECT_EQ(interfaces_for_host("0.0.0.0", all).size(), 3u);
  EXPECT_EQ(interfaces_for_host("::", all).size(), 5u);
  const std::vector<NetInterface> one = interfaces_for_host("169.254.20.1", all);
  ASSERT_EQ(one.size(), 1u);
  EXPECT_EQ(one[0].name, "bridge0");
  EXPECT_TRUE(interfaces_for_host("10.9.9.9", all).empty());
}

TEST(Interfaces, TextNamesTheThunderboltBridgeAndLinkLocal) {
  EXPECT_EQ(interfaces_text(interfaces_for_host("0.0.0.0", mac_mini())),
            "lo0 127.0.0.1 loopback; en0 192.168.1.20; bridge0 169.254.20.1 Thunderbolt Bridge, "
            "link-local");
  EXPECT_EQ(interfaces_text({{"thunderbolt0", "10.0.0.1", false, false, 20000}}),
            "thunderbolt0 10.0.0.1 Thunderbolt 20 Gb/s");
  EXPECT_EQ(interfaces_text({{"eth0", "10.0.0.2", false, false, 2500}}), "eth0 10.0.0.2 2.5 Gb/s");
  EXPECT_EQ(interfaces_text({{"eth0", "10.0.0.2", false, false, 100}}), "eth0 10.0.0.2 100 Mb/s");
  EXPECT_EQ(interface_kind({"en0", "fe80::1", true, false, 0}), "link-local");
  EXPECT_EQ(interfaces_text({}), "");
}

TEST(Interfaces, LinkSpeedFromSysfs) {
  EXPECT_EQ(parse_link_speed("10000\n"), 10000);
  EXPECT_EQ(parse_link_speed("1000"), 1000);
  EXPECT_EQ(parse_link_speed("-1\n"), 0);  // no link, or a virtual device
  EXPECT_EQ(parse_link_speed(""), 0);
  EXPECT_EQ(parse_link_speed("fast"), 0);
  EXPECT_EQ(parse_link_speed("100 Mb/s"), 0);
}

TEST(Interfaces, ThisMachineHasALoopback) {
  bool loopback = false;
  for (const NetInterface& i : list_interfaces()) loopback = loopback || i.loopback;
  EXPECT_TRUE(loopback);
  const std::vector<NetInterface> local = interfaces_for_host("127.0.0.1", list_interfaces());
  ASSERT_EQ(local.size(), 1u);
  EXPECT_TRUE(local[0].loopback);
}

}  // namespace
}  // namespace herd::net

#include "net/allow_list.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "util/error.h"

namespace herd::net {
namespace {

using ::testing::HasSubstr;

TEST(AllowListTest, OneIdPerLineWithComments) {
  NodeIdentity a = NodeIdentity::generate();
  NodeIdentity b = NodeIdentity::generate();
  NodeIdentity c = NodeIdentity::generate();
  AllowList list = AllowList::parse("# the pod\n\n  " + a.id().to_text() + "  # mini-1\r\n" +
                                        b.id().to_text() + "\n" + a.id().to_text(),
                                    "test");
  EXPECT_EQ(list.ids().size(), 2u);
  EXPECT_TRUE(list.contains(a.id()));
  EXPECT_TRUE(list.contains(b.id()));
  EXPECT_FALSE(list.contains(c.id()));
}

TEST(AllowListTest, BadLinesAndEmptyListsAreErrors) {
  NodeIdentity a = NodeIdentity::generate();
  EXPECT_THAT([&] { AllowList::parse(a.id().to_text() + "\nnot-an-id\n", "allow-list 'f'"); },
              ::testing::ThrowsMessage<Error>(
                  HasSubstr("[net] allow-list 'f' line 2: 'not-an-id' is not a node id")));
  EXPECT_THAT([&] { AllowList::parse("# nobody\n", "allow-list 'f'"); },
              ::testing::ThrowsMessage<Error>(HasSubstr("names no node id")));
  EXPECT_THAT([&] { AllowList::load_file("/nonexistent/ids"); },
              ::testing::ThrowsMessage<Error>(HasSubstr("allow-list '/nonexistent/ids'")));
}

}  // namespace
}  // namespace herd::net

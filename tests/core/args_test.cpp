#include "core/args.h"

#include <gtest/gtest.h>

#include "core/error.h"

namespace sinklm {
namespace {

std::vector<FlagSpec> flags() { return {{"out", "DIR", "where"}, {"json", "", "json"}, {"set", "K=V", "set"}}; }

TEST(Args, ParsesValuesFlagsRepeatsAndPositionals) {
  Args a("x", "", flags(), {"file.yaml", "--out", "d", "--json", "--set", "a=1", "--set=b=2"});
  EXPECT_EQ(a.get("out"), "d");
  EXPECT_TRUE(a.has("json"));
  EXPECT_EQ(a.get_all("set"), (std::vector<std::string>{"a=1", "b=2"}));
  EXPECT_EQ(a.positionals(), std::vector<std::string>{"file.yaml"});
}

TEST(Args, UnknownOptionSuggestsClosest) {
  try {
    Args a("train", "", flags(), {"--ot", "d"});
    FAIL() << "no error";
  } catch (const UserError& e) {
    EXPECT_NE(std::string(e.what()).find("unknown option '--ot' (did you mean '--out'?)"), std::string::npos) << e.what();
  }
}

TEST(Args, MissingValueAndMissingRequiredAreErrors) {
  EXPECT_THROW(Args("x", "", flags(), {"--out"}), UserError);
  Args a("x", "", flags(), {});
  EXPECT_THROW(a.require("out"), UserError);
}

}  // namespace
}  // namespace sinklm

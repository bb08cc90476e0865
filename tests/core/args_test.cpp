#include "core/config/args.h"

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

TEST(Flags, BoundFlagsSetTheirFieldsAndKeepTheirDefaults) {
  int64_t workers = 64;
  double timeout = 30;
  std::string dir = "sessions";
  bool quiet = false;
  std::vector<std::string> sets;
  auto declare = [&] {
    return std::vector<FlagSpec>{flag(&workers, "workers", "N", "threads", Range{1, 4096}),
                                 flag(&timeout, "timeout", "S", "seconds", Range{0.001, 86400}),
                                 flag(&dir, "dir", "DIR", "where"), flag(&quiet, "quiet", "less output"),
                                 flag(&sets, "set", "K=V", "override")};
  };
  Args a("x", "", declare(), {"--workers", "8", "--quiet", "--set", "a=1", "--set=b=2"});
  EXPECT_EQ(workers, 8);
  EXPECT_EQ(timeout, 30);  // not given: the field's own value
  EXPECT_EQ(dir, "sessions");
  EXPECT_TRUE(quiet);
  EXPECT_EQ(sets, (std::vector<std::string>{"a=1", "b=2"}));
  workers = 64;
  const std::string help = Args("x", "", declare(), {"--help"}).usage();
  EXPECT_NE(help.find("threads (default 64) in [1, 4096]"), std::string::npos) << help;
  const std::string markdown = Args("x", "", declare(), {}).markdown();
  EXPECT_NE(markdown.find("| `--workers N` | `64` | [1, 4096] | threads |"), std::string::npos) << markdown;
  EXPECT_NE(markdown.find("| `--dir DIR` | `sessions` |  | where |"), std::string::npos) << markdown;
}

TEST(Flags, OutOfRangeAndMalformedValuesNameTheFlag) {
  int64_t workers = 64;
  double timeout = 30;
  auto error = [&](std::vector<std::string> argv) {
    try {
      Args("x", "", {flag(&workers, "workers", "N", "threads", Range{1, 4096}), flag(&timeout, "timeout", "S", "s", Range{0.001, 60})},
           argv);
    } catch (const UserError& e) {
      return std::string(e.what());
    }
    return std::string();
  };
  EXPECT_NE(error({"--workers", "0"}).find("option --workers must be in [1, 4096], got 0"), std::string::npos);
  EXPECT_NE(error({"--workers", "8x"}).find("option --workers must be an integer, got '8x'"), std::string::npos);
  EXPECT_NE(error({"--timeout", "61"}).find("option --timeout must be in [0.001, 60], got 61"), std::string::npos);
  EXPECT_EQ(workers, 64) << "a rejected value leaves the field alone";
  EXPECT_EQ(error({"--help", "--workers", "0"}), "") << "--help checks nothing";
}

TEST(Flags, IntegerListsAreCheckedItemByItem) {
  std::vector<int64_t> distances = {8, 16};
  auto parse = [&](std::vector<std::string> argv) {
    try {
      Args("x", "", {flag(&distances, "distances", "LIST", "d", Range{4, 100})}, argv);
    } catch (const UserError& e) {
      return std::string(e.what());
    }
    return std::string();
  };
  EXPECT_NE(Args("x", "", {flag(&distances, "distances", "LIST", "d", Range{4, 100})}, {}).markdown().find("| `8,16` | [4, 100] |"),
            std::string::npos);
  EXPECT_EQ(parse({"--distances", "4,40,100"}), "");
  EXPECT_EQ(distances, (std::vector<int64_t>{4, 40, 100}));
  EXPECT_EQ(parse({"--distances", "1,2", "--distances=12"}), "option --distances must be in [4, 100], got 1");
  EXPECT_EQ(distances, (std::vector<int64_t>{4, 40, 100})) << "a rejected list leaves the field alone";
  EXPECT_EQ(parse({"--distances", "8,x"}), "option --distances must be an integer, got 'x'");
  EXPECT_NE(parse({"--distances", ""}).find("needs a comma-separated list"), std::string::npos);
  EXPECT_EQ(parse({"--distances", "6", "--distances", "9,10"}), "");
  EXPECT_EQ(distances, (std::vector<int64_t>{9, 10})) << "a later list replaces an earlier one";
}

}  // namespace
}  // namespace sinklm

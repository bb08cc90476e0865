#include "cli/command_steps.h"

#include <iomanip>
#include <iostream>

#include "core/config/args.h"
#include "core/config/text_distance.h"
#include "core/error.h"

namespace sinklm {

int run_command_steps(const std::string& command, const std::vector<CommandStep>& steps,
                      const std::vector<std::string>& args) {
  std::vector<std::string> names;
  std::string listed;
  for (const auto& s : steps) {
    names.push_back(s.name);
    listed += (listed.empty() ? "" : ", ") + std::string(s.name);
  }
  if (!args.empty() && args[0] == kMarkdownHelp) {  // docs/cli.md: every step
    for (const auto& s : steps) {
      std::cout << "### sinklm " << command << " " << s.name << "\n\n" << s.summary << ".\n\n";
      s.run({kMarkdownHelp});
      std::cout << "\n";
    }
    return 0;
  }
  if (args.empty() || args[0] == "--help" || args[0] == "-h") {
    std::cout << "usage: sinklm " << command << " <step> [options]   (sinklm " << command << " <step> --help)\n\nsteps:\n";
    for (const auto& s : steps) std::cout << "  " << std::left << std::setw(14) << s.name << s.summary << "\n";
    return args.empty() ? 2 : 0;
  }
  for (const auto& s : steps)
    if (args[0] == s.name) return s.run(std::vector<std::string>(args.begin() + 1, args.end()));
  fail("unknown ", command, " step '", args[0], "'", did_you_mean(args[0], names), "; steps: ", listed);
}

}  // namespace sinklm

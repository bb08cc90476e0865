// A command made of steps (`sinklm prepare <step>`, `sinklm export <format>`): the one dispatcher, its --help
// list and the docs/cli.md section of every step.
#pragma once
#include <string>
#include <vector>

namespace sinklm {

struct CommandStep {
  const char* name;
  const char* summary;
  int (*run)(const std::vector<std::string>& args);
};

// Runs the step args[0] names with the rest; UserError for an unknown one, naming the steps.
int run_command_steps(const std::string& command, const std::vector<CommandStep>& steps,
                      const std::vector<std::string>& args);

}  // namespace sinklm

#include "cli/commands.h"

#include <iostream>

#include "core/args.h"
#include "core/config.h"
#include "core/config_reference.h"
#include "core/error.h"

namespace sinklm {

int run_config_command(const std::vector<std::string>& argv) {
  Args args("config", "(--markdown | --yaml)",
            {{"markdown", "", "print the configuration reference (docs/configuration.md) as Markdown"},
             {"yaml", "", "print every key at its default as a YAML file, the schema's help as comments"}},
            argv);
  if (args.print_help_if_requested()) return 0;
  if (args.has("markdown") == args.has("yaml")) fail("give exactly one of --markdown or --yaml (see --help)");
  std::cout << (args.has("markdown") ? config_reference_markdown() : Config().to_yaml());
  return 0;
}

}  // namespace sinklm

#include "cli/commands.h"

#include <iostream>

#include "core/config/args.h"
#include "core/config/config.h"
#include "core/config/config_reference.h"
#include "core/error.h"

namespace sinklm {

int run_config_command(const std::vector<std::string>& argv) {
  bool markdown = false, yaml = false;
  std::string choices;
  Args args("config", "(--markdown | --yaml | --choices KEY)",
            {flag(&markdown, "markdown", "print the configuration reference (docs/configuration.md) as Markdown"),
             flag(&yaml, "yaml", "print every key at its default as a YAML file, the schema's help as comments"),
             flag(&choices, "choices", "KEY", "print a choice key's choices, one per line (model.sink.mode: every sink mode)")},
            argv);
  if (args.print_help_if_requested()) return 0;
  if (markdown + yaml + args.has("choices") != 1) fail("give exactly one of --markdown, --yaml or --choices KEY (see --help)");
  if (!choices.empty()) {
    const KeySpec* spec = find_key_spec(choices);
    if (!spec || spec->type != ValueType::Choice)
      fail("--choices ", choices, ": not a choice key (`sinklm config --markdown` lists the keys)");
    for (const auto& choice : spec->choices) std::cout << choice << "\n";
    return 0;
  }
  std::cout << (markdown ? config_reference_markdown() : Config().to_yaml());
  return 0;
}

}  // namespace sinklm

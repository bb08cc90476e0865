// Subcommands of the evaluation module; listed in cli/main.cpp.
#pragma once
#include <string>
#include <vector>

namespace sinklm {

// sinklm eval --checkpoint DIR --tasks LIST --data DIR | eval --compare A B | eval build-tasks ...
int run_eval_command(const std::vector<std::string>& args);
// sinklm analyze --checkpoint DIR --text FILE --out DIR: where attention goes, per layer and head.
int run_analyze_command(const std::vector<std::string>& args);

}  // namespace sinklm

// Subcommands of the model module; listed in cli/main.cpp.
#pragma once
#include <string>
#include <vector>

namespace sinklm {

int run_info_command(const std::vector<std::string>& args);     // sinklm info <config.yaml | checkpoint-dir>
int run_init_command(const std::vector<std::string>& args);     // sinklm init --config F --out DIR
int run_forward_command(const std::vector<std::string>& args);  // sinklm forward --checkpoint DIR ...

}  // namespace sinklm

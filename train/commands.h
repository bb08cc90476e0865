// Subcommands of the train module; listed in cli/main.cpp.
#pragma once
#include <string>
#include <vector>

namespace sinklm {

int run_train_command(const std::vector<std::string>& args);  // [mpirun -np N] sinklm train --config F --out DIR

}  // namespace sinklm

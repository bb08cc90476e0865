// What `sinklm info` reports about a model: architecture, sink mode, parameter counts, memory.
#pragma once
#include <nlohmann/json.hpp>
#include <string>

#include "model/model_config.h"

namespace sinklm {

nlohmann::json model_summary_json(const ModelConfig& config);
std::string model_summary_text(const ModelConfig& config);  // aligned, human-readable lines

}  // namespace sinklm

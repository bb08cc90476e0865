// The configuration reference, docs/configuration.md, generated from the schema (core/config/config_schema.cpp) so
// the two cannot drift: `sinklm config --markdown > docs/configuration.md`; a test fails when the
// committed file is stale.
#pragma once
#include <string>

namespace sinklm {

// One table per top-level section (model, data, train, ...): key, type, default, range or choices, help.
std::string config_reference_markdown();

}  // namespace sinklm

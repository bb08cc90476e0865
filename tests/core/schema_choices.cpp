// test_core checks the whole schema, model.sink.mode's choices included. Those come from model/sink.cpp's
// table (core/config/config.h: provide_choices), which registers them when its object is linked in: this reference
// links it.
#include "model/sink.h"

namespace {
[[maybe_unused]] const auto& kSinkModes = sinklm::all_sink_modes();
}  // namespace

// Precompiled header for every LibTorch translation unit (see CMakeLists.txt). Parsing LibTorch's headers
// dominates compile time on small machines; this is the only place <torch/torch.h> is included.
#pragma once
#include <torch/torch.h>

#include "core/system/cpu_features.h"

#include <cstdlib>
#include <string>

#include "core/error.h"

namespace sinklm {
namespace {

// The widest set SINKLM_CPU_ISA allows: 2 all, 1 AVX2, 0 none.
int isa_cap() {
  const char* asked = std::getenv("SINKLM_CPU_ISA");
  const std::string value = asked ? asked : "";
  if (value.empty() || value == "avx512") return 2;
  if (value == "avx2") return 1;
  if (value == "none") return 0;
  fail("SINKLM_CPU_ISA='", value, "': expected avx512 (the default: what the CPU has), avx2 or none");
}

}  // namespace

bool isa_allowed(InstructionSet set) {
  static const int cap = isa_cap();
  return cap >= (set == InstructionSet::Avx512 ? 2 : 1);
}

}  // namespace sinklm

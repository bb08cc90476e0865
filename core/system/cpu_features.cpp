#include "core/system/cpu_features.h"

#if defined(__x86_64__) && defined(__linux__)
#include <cpuid.h>
#include <sys/syscall.h>
#include <unistd.h>
#endif

#include <cstdlib>
#include <string>

#include "core/error.h"

namespace sinklm {
namespace {

// The widest set SINKLM_CPU_ISA allows: 3 all, 2 AVX-512 without AMX, 1 AVX2, 0 none.
int isa_cap() {
  const char* asked = std::getenv("SINKLM_CPU_ISA");
  const std::string value = asked ? asked : "";
  if (value.empty() || value == "amx") return 3;
  if (value == "avx512") return 2;
  if (value == "avx2") return 1;
  if (value == "none") return 0;
  fail("SINKLM_CPU_ISA='", value, "': expected amx (the default: what the CPU has), avx512, avx2 or none");
}

// AMX-TILE and one of its products (CPUID leaf 7 EDX: bit 24 the tiles, 22 AMX-BF16, 25 AMX-INT8), and the
// kernel's leave to use the tile data: Linux grants it per process on request (arch_prctl
// ARCH_REQ_XCOMP_PERM for XFEATURE_XTILEDATA); a tile instruction without it is SIGILL.
bool amx_usable(unsigned product_bit) {
#if defined(__x86_64__) && defined(__linux__)
  unsigned a = 0, b = 0, c = 0, d = 0;
  if (!__get_cpuid_count(7, 0, &a, &b, &c, &d) || !(d & (1u << 24)) || !(d & (1u << product_bit))) return false;
  constexpr long kReqXcompPerm = 0x1023, kXfeatureXtiledata = 18;
  return syscall(SYS_arch_prctl, kReqXcompPerm, kXfeatureXtiledata) == 0;
#else
  (void)product_bit;
  return false;
#endif
}

}  // namespace

bool isa_allowed(InstructionSet set) {
  static const int cap = isa_cap();
  return cap >= (set == InstructionSet::Amx ? 3 : set == InstructionSet::Avx512 ? 2 : 1);
}

bool cpu_has_amx_bf16() {
  static const bool present = isa_allowed(InstructionSet::Amx) && cpu_has_avx512_bf16() && amx_usable(22);
  return present;
}

bool cpu_has_amx_int8() {
  static const bool present = isa_allowed(InstructionSet::Amx) && cpu_has_avx512_vnni() && amx_usable(25);
  return present;
}

}  // namespace sinklm

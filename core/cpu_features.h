// What the CPU this process runs on can execute, for kernels written for one instruction set
// (model/kernels/few_row_matmul.cpp, model/kernels/cache_attention_kernel.cpp): they are compiled for it function by
// function and called only where it is present, so one binary runs on every x86-64 CPU.
#pragma once

namespace sinklm {

inline bool cpu_has_avx512f() {
#if defined(__x86_64__) && defined(__GNUC__)
  static const bool present = __builtin_cpu_supports("avx512f");
  return present;
#else
  return false;
#endif
}

}  // namespace sinklm

// What the CPU this process runs on can execute, for kernels written for one instruction set
// (model/kernels/few_row_matmul.cpp, model/kernels/cache_attention_kernel.cpp): they are compiled for it function by
// function and called only where it is present, so one binary runs on every x86-64 CPU.
#pragma once

namespace sinklm {

#if defined(__x86_64__) && defined(__GNUC__)
#define SINKLM_CPU_HAS(feature) __builtin_cpu_supports(feature)  // the name must be a literal
#else
#define SINKLM_CPU_HAS(feature) false
#endif

inline bool cpu_has_avx512f() {
  static const bool present = SINKLM_CPU_HAS("avx512f");
  return present;
}

// AVX512-BW (byte and word lanes), AVX512-BF16 (vdpbf16ps) and AVX512-VNNI (vpdpbusd): the bf16 and int8
// few-row products (model/kernels/few_row_matmul.h).
inline bool cpu_has_avx512_bf16() {
  static const bool present = cpu_has_avx512f() && SINKLM_CPU_HAS("avx512bf16");
  return present;
}

inline bool cpu_has_avx512_vnni() {
  static const bool present = cpu_has_avx512f() && SINKLM_CPU_HAS("avx512bw") && SINKLM_CPU_HAS("avx512vnni");
  return present;
}

}  // namespace sinklm

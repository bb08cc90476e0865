// What the CPU this process runs on can execute, for kernels written for one instruction set
// (model/kernels/): they are compiled for it function by function and called only where it is present, so one
// binary runs on every x86-64 CPU.
//
// SINKLM_CPU_ISA caps what the kernels may use below what the CPU has (as ATEN_CPU_CAPABILITY caps LibTorch's):
// `avx512` (the default: everything present), `avx2` (the AVX2 kernels and LibTorch's ops, as on a CPU without
// AVX-512) or `none` (LibTorch's ops only). Tests and benchmarks run the narrower paths on a wider CPU with it.
#pragma once

namespace sinklm {

#if defined(__x86_64__) && defined(__GNUC__)
#define SINKLM_CPU_HAS(feature) __builtin_cpu_supports(feature)  // the name must be a literal
#else
#define SINKLM_CPU_HAS(feature) false
#endif

// The vector instruction sets the kernels of model/kernels/ are written for, widest first.
enum class InstructionSet { Avx512, Avx2 };
inline const char* instruction_set_name(InstructionSet set) { return set == InstructionSet::Avx512 ? "AVX-512" : "AVX2"; }

// Whether SINKLM_CPU_ISA lets the kernels use `set` (core/system/cpu_features.cpp; a value it does not know is a
// UserError naming the variable).
bool isa_allowed(InstructionSet set);

inline bool cpu_has_avx512f() {
  static const bool present = isa_allowed(InstructionSet::Avx512) && SINKLM_CPU_HAS("avx512f");
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

// AVX2 with FMA (and F16C, which every such CPU has): the bf16 and int8 few-row products on CPUs without those
// AVX-512 sets, and the decode attention over bfloat16 and int8 K/V (model/kernels/cache_attention_kernel.h).
inline bool cpu_has_avx2_fma() {
  static const bool present = isa_allowed(InstructionSet::Avx2) && SINKLM_CPU_HAS("avx2") && SINKLM_CPU_HAS("fma") &&
                              SINKLM_CPU_HAS("f16c");
  return present;
}

}  // namespace sinklm

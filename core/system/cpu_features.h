// What the CPU this process runs on can execute, for kernels written for one instruction set
// (model/kernels/): they are compiled for it function by function and called only where it is present, so one
// binary runs on every x86-64 CPU.
//
// SINKLM_CPU_ISA caps what the kernels may use below what the CPU has (as ATEN_CPU_CAPABILITY caps LibTorch's):
// `amx` (the default: everything present), `avx512` (the AVX-512 kernels, not the AMX tiles), `avx2` (the AVX2
// kernels and LibTorch's ops, as on a CPU without AVX-512) or `none` (LibTorch's ops only). Tests and benchmarks
// run the narrower paths on a wider CPU with it. (LibTorch's own products use AMX through oneDNN regardless.)
#pragma once

namespace sinklm {

#if defined(__x86_64__) && defined(__GNUC__)
#define SINKLM_CPU_HAS(feature) __builtin_cpu_supports(feature)  // the name must be a literal
#else
#define SINKLM_CPU_HAS(feature) false
#endif

// The vector instruction sets the kernels of model/kernels/ are written for, widest first.
enum class InstructionSet { Amx, Avx512, Avx2 };
inline const char* instruction_set_name(InstructionSet set) {
  return set == InstructionSet::Amx ? "AMX" : set == InstructionSet::Avx512 ? "AVX-512" : "AVX2";
}

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

// AMX-TILE and AMX-BF16 (Intel Sapphire Rapids and later) with the process's leave to use the tiles, asked of
// the kernel once here, and AVX512-BF16 beside them: the prompt attention of model/kernels/prompt_attention/amx_attention.h.
bool cpu_has_amx_bf16();
// AMX-TILE and AMX-INT8 with that leave, and AVX512-VNNI beside them: the int8 few-row product's tiles of 16 rows
// (model/kernels/few_row_matmul.h).
bool cpu_has_amx_int8();

// AVX2 with FMA (and F16C, which every such CPU has): the bf16 and int8 few-row products on CPUs without those
// AVX-512 sets, and the decode attention over bfloat16 and int8 K/V (model/kernels/cache_attention_kernel.h).
inline bool cpu_has_avx2_fma() {
  static const bool present = isa_allowed(InstructionSet::Avx2) && SINKLM_CPU_HAS("avx2") && SINKLM_CPU_HAS("fma") &&
                              SINKLM_CPU_HAS("f16c");
  return present;
}

}  // namespace sinklm

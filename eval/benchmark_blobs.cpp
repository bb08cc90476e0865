// The official sets enter the object file through the assembler's .incbin: the bytes are copied as they are,
// at no compile cost (a 1.3 MB array literal costs minutes of compiler time on 2 cores). CMakeLists.txt
// builds this file without ccache, which hashes the source but not the files .incbin reads, and makes it
// depend on them, so a changed set is re-embedded; eval/benchmark_data.cpp still checks every sha256.
#include "eval/benchmark_blobs.h"

#ifndef SINKLM_BENCHMARK_DIR
#error "SINKLM_BENCHMARK_DIR must name the directory of the .jsonl.gz files (CMakeLists.txt sets it)"
#endif

// Hidden globals, so the C++ declarations below bind to these labels whatever the code model.
#define SINKLM_EMBED(task)                                                    \
  __asm__(".pushsection .rodata\n"                                            \
          ".global sinklm_benchmark_" #task "_begin\n"                        \
          ".hidden sinklm_benchmark_" #task "_begin\n"                        \
          ".global sinklm_benchmark_" #task "_end\n"                          \
          ".hidden sinklm_benchmark_" #task "_end\n"                          \
          "sinklm_benchmark_" #task "_begin:\n"                               \
          ".incbin \"" SINKLM_BENCHMARK_DIR "/" #task ".jsonl.gz\"\n"         \
          "sinklm_benchmark_" #task "_end:\n"                                 \
          ".popsection\n");                                                   \
  extern "C" const char sinklm_benchmark_##task##_begin[], sinklm_benchmark_##task##_end[];

SINKLM_EMBED(arc_challenge)
SINKLM_EMBED(arc_easy)
SINKLM_EMBED(lambada_openai)
SINKLM_EMBED(openbookqa)
SINKLM_EMBED(piqa)
SINKLM_EMBED(winogrande)

namespace sinklm {

std::string_view embedded_benchmark(const std::string& task) {
  struct Blob {
    const char* task;
    const char* begin;
    const char* end;
  };
#define SINKLM_BLOB(task) {#task, sinklm_benchmark_##task##_begin, sinklm_benchmark_##task##_end}
  static const Blob blobs[] = {SINKLM_BLOB(arc_challenge), SINKLM_BLOB(arc_easy), SINKLM_BLOB(lambada_openai),
                               SINKLM_BLOB(openbookqa),    SINKLM_BLOB(piqa),     SINKLM_BLOB(winogrande)};
#undef SINKLM_BLOB
  for (const Blob& blob : blobs)
    if (task == blob.task) return {blob.begin, static_cast<size_t>(blob.end - blob.begin)};
  return {};
}

}  // namespace sinklm

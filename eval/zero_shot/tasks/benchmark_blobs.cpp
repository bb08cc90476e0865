// The official sets enter the object file through the assembler's .incbin: the bytes are copied as they are,
// at no compile cost (a 1.3 MB array literal costs minutes of compiler time on 2 cores). CMakeLists.txt
// builds this file without ccache, which hashes the source but not the files .incbin reads, and makes it
// depend on them, so a changed set is re-embedded; eval/zero_shot/tasks/benchmark_data.cpp still checks every sha256.
#include "eval/zero_shot/tasks/benchmark_blobs.h"

#ifndef SINKLM_BENCHMARK_DIR
#error "SINKLM_BENCHMARK_DIR must name the directory of the .gz files (CMakeLists.txt sets it)"
#endif

// <task><extension>.gz (task_file_name + ".gz"). Hidden globals, so the C++ declarations below bind to these
// labels whatever the code model.
#define SINKLM_EMBED(task, extension)                                         \
  __asm__(".pushsection .rodata\n"                                            \
          ".global sinklm_benchmark_" #task "_begin\n"                        \
          ".hidden sinklm_benchmark_" #task "_begin\n"                        \
          ".global sinklm_benchmark_" #task "_end\n"                          \
          ".hidden sinklm_benchmark_" #task "_end\n"                          \
          "sinklm_benchmark_" #task "_begin:\n"                               \
          ".incbin \"" SINKLM_BENCHMARK_DIR "/" #task extension ".gz\"\n"     \
          "sinklm_benchmark_" #task "_end:\n"                                 \
          ".popsection\n");                                                   \
  extern "C" const char sinklm_benchmark_##task##_begin[], sinklm_benchmark_##task##_end[];

SINKLM_EMBED(arc_challenge, ".jsonl")
SINKLM_EMBED(arc_easy, ".jsonl")
SINKLM_EMBED(hellaswag, ".txt")
SINKLM_EMBED(lambada_openai, ".jsonl")
SINKLM_EMBED(openbookqa, ".jsonl")
SINKLM_EMBED(piqa, ".jsonl")
SINKLM_EMBED(winogrande, ".jsonl")

namespace sinklm {

std::string_view embedded_benchmark(const std::string& task) {
  struct Blob {
    const char* task;
    const char* begin;
    const char* end;
  };
#define SINKLM_BLOB(task) {#task, sinklm_benchmark_##task##_begin, sinklm_benchmark_##task##_end}
  static const Blob blobs[] = {SINKLM_BLOB(arc_challenge),  SINKLM_BLOB(arc_easy),   SINKLM_BLOB(hellaswag),
                               SINKLM_BLOB(lambada_openai), SINKLM_BLOB(openbookqa), SINKLM_BLOB(piqa),
                               SINKLM_BLOB(winogrande)};
#undef SINKLM_BLOB
  for (const Blob& blob : blobs)
    if (task == blob.task) return {blob.begin, static_cast<size_t>(blob.end - blob.begin)};
  return {};
}

}  // namespace sinklm

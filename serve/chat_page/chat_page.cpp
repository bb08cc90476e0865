// The page's files enter the object file through the assembler's .incbin, as eval/zero_shot/tasks/benchmark_blobs.cpp does
// for the evaluation sets: the bytes are copied as they are, with no generated source. CMakeLists.txt builds
// this file without ccache (which hashes this source, not the files .incbin reads) and makes the object
// depend on every page file, so editing the page rebuilds it.
#include "serve/chat_page/chat_page.h"

#ifndef SINKLM_CHAT_PAGE_DIR
#error "SINKLM_CHAT_PAGE_DIR must name server/chat_page (CMakeLists.txt sets it)"
#endif

// Hidden globals, so the C++ declarations below bind to these labels whatever the code model.
#define SINKLM_EMBED(name, file)                                     \
  __asm__(".pushsection .rodata\n"                                   \
          ".global sinklm_chat_page_" #name "_begin\n"               \
          ".hidden sinklm_chat_page_" #name "_begin\n"               \
          ".global sinklm_chat_page_" #name "_end\n"                 \
          ".hidden sinklm_chat_page_" #name "_end\n"                 \
          "sinklm_chat_page_" #name "_begin:\n"                      \
          ".incbin \"" SINKLM_CHAT_PAGE_DIR "/" file "\"\n"          \
          "sinklm_chat_page_" #name "_end:\n"                        \
          ".popsection\n");                                          \
  extern "C" const char sinklm_chat_page_##name##_begin[], sinklm_chat_page_##name##_end[];

SINKLM_EMBED(index, "index.html")
SINKLM_EMBED(script, "chat.js")
SINKLM_EMBED(style, "chat.css")
SINKLM_EMBED(icon, "favicon.svg")

namespace sinklm {

const std::vector<StaticFile>& chat_page_files() {
#define SINKLM_BLOB(name) \
  std::string_view(sinklm_chat_page_##name##_begin, static_cast<size_t>(sinklm_chat_page_##name##_end - sinklm_chat_page_##name##_begin))
  static const std::vector<StaticFile> files = {
      {"/", "text/html; charset=utf-8", SINKLM_BLOB(index)},
      {"/chat.js", "text/javascript; charset=utf-8", SINKLM_BLOB(script)},
      {"/chat.css", "text/css; charset=utf-8", SINKLM_BLOB(style)},
      {"/favicon.svg", "image/svg+xml", SINKLM_BLOB(icon)},
  };
#undef SINKLM_BLOB
  return files;
}

}  // namespace sinklm

#include "data/prepare/input_files.h"

#include <glob.h>
#include <sys/stat.h>

#include <algorithm>
#include <cstring>
#include <filesystem>
#include <nlohmann/json.hpp>

#include "core/ends_with.h"
#include "core/error.h"
#include "data/corpus/corpus_files.h"
#include "data/io/read_file.h"

namespace fs = std::filesystem;

namespace sinklm {
namespace {

constexpr const char* kExtensions = ".jsonl, .jsonl.gz, .jsonl.zst, .txt, .txt.gz or .txt.zst";

std::optional<InputKind> kind_of(const std::string& path, const InputOptions& options) {
  for (const char* stem : {".jsonl", ".jsonl.gz", ".jsonl.zst"})
    if (ends_with(path, stem)) return InputKind::Jsonl;
  for (const char* stem : {".txt", ".txt.gz", ".txt.zst"})
    if (ends_with(path, stem)) return options.text_blocks ? InputKind::TextBlocks : InputKind::TextFile;
  return std::nullopt;
}

InputFile describe(const std::string& path, InputKind kind) {
  struct stat st {};
  if (::stat(path.c_str(), &st) != 0) fail(path, ": cannot stat: ", std::strerror(errno));
  InputFile file;
  file.path = fs::path(path).lexically_normal().string();
  file.disk_bytes = static_cast<uint64_t>(st.st_size);
  file.mtime_ns = static_cast<int64_t>(st.st_mtim.tv_sec) * 1000000000 + st.st_mtim.tv_nsec;
  file.kind = kind;
  file.compression = compression_of(path);
  return file;
}

bool is_corpus_directory(const std::string& dir) {
  const std::string manifest = dir + "/manifest.json";
  if (!fs::is_regular_file(manifest)) return false;
  try {
    return nlohmann::json::parse(read_file(manifest)).value("format", "") == "sinklm-corpus";
  } catch (const nlohmann::json::exception&) {
    return false;
  }
}

void add_corpus_directory(const std::string& dir, std::vector<InputFile>& out) {
  for (Split split : all_splits()) {
    const std::string path = corpus_split_file(dir, split);
    if (!fs::is_regular_file(path)) fail(dir, ": corpus directory lacks ", path, " (re-run `sinklm prepare corpus`)");
    InputFile file = describe(path, InputKind::Jsonl);
    file.split = split;
    file.has_ids = true;
    out.push_back(std::move(file));
  }
}

void add_path(const std::string& path, const std::string& spec, const InputOptions& options,
              std::vector<InputFile>& out) {
  if (fs::is_directory(path)) {
    if (is_corpus_directory(path)) return add_corpus_directory(path, out);
    size_t found = 0;
    for (auto it = fs::recursive_directory_iterator(path, fs::directory_options::follow_directory_symlink);
         it != fs::recursive_directory_iterator(); ++it) {
      const std::string name = it->path().filename().string();
      if (!name.empty() && name[0] == '.') {  // hidden files and directories (.git, editor swap files)
        if (it->is_directory()) it.disable_recursion_pending();
        continue;
      }
      if (!it->is_regular_file()) continue;
      if (auto kind = kind_of(name, options)) {
        out.push_back(describe(it->path().string(), *kind));
        ++found;
      }
    }
    if (found == 0) fail(spec, ": directory holds no ", kExtensions, " file");
    return;
  }
  auto kind = kind_of(path, options);
  if (!kind) fail(path, ": unknown input type (expected ", kExtensions, ", a directory or a corpus directory)");
  out.push_back(describe(path, *kind));
}

}  // namespace

const char* input_kind_name(InputKind kind) {
  switch (kind) {
    case InputKind::Jsonl: return "jsonl";
    case InputKind::TextFile: return "text-file";
    case InputKind::TextBlocks: return "text-blocks";
  }
  SINKLM_ASSERT(false, "unknown input kind");
}

std::vector<InputFile> expand_inputs(const std::vector<std::string>& specs, const InputOptions& options) {
  if (specs.empty()) fail("--in: no input given (files, directories or glob patterns)");
  std::vector<InputFile> files;
  for (const std::string& spec : specs) {
    if (fs::exists(spec)) {
      add_path(spec, spec, options, files);
      continue;
    }
    if (spec.find_first_of("*?[") == std::string::npos)
      fail(spec, ": no such file or directory (--in takes files, directories and glob patterns)");
    glob_t matches{};
    int rc = ::glob(spec.c_str(), 0, nullptr, &matches);
    std::vector<std::string> paths(matches.gl_pathv, matches.gl_pathv + (rc == 0 ? matches.gl_pathc : 0));
    globfree(&matches);
    if (paths.empty()) fail(spec, ": the pattern matches no file");
    for (const std::string& path : paths) add_path(path, spec, options, files);
  }
  std::sort(files.begin(), files.end(), [](const InputFile& a, const InputFile& b) { return a.path < b.path; });
  files.erase(std::unique(files.begin(), files.end(),
                          [](const InputFile& a, const InputFile& b) { return a.path == b.path; }),
              files.end());
  return files;
}

}  // namespace sinklm

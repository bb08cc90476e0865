#include "data/tokenizers/tokenizer_files.h"

#include <filesystem>

#include "core/files/atomic_dir.h"
#include "core/ends_with.h"
#include "core/error.h"
#include "core/files/sha256.h"
#include "data/io/read_file.h"

namespace fs = std::filesystem;

namespace sinklm {

std::string find_tokenizer_file(const std::string& dir) {
  if (dir.empty() || !fs::is_directory(dir)) return "";
  for (const char* name : {"sinklm.tokenizer.json", "vocab.json", "tokenizer.model"})
    if (fs::exists(fs::path(dir) / name)) return (fs::path(dir) / name).string();
  for (const auto& entry : fs::directory_iterator(dir))
    if (entry.path().extension() == ".tiktoken") return entry.path().string();
  if (fs::exists(fs::path(dir) / "tokenizer.json")) return (fs::path(dir) / "tokenizer.json").string();
  return "";
}

std::string checkpoint_tokenizer_name(const std::string& file) {
  const std::string name = fs::path(file).filename().string();
  if (name == "vocab.json" || name == "merges.txt" || ends_with(name, ".tiktoken")) return name;
  if (ends_with(name, ".model")) return "tokenizer.model";
  if (ends_with(name, ".json")) return "sinklm.tokenizer.json";
  return name;
}

std::vector<std::string> tokenizer_files(const std::string& path, const std::string& what) {
  if (!fs::exists(path)) fail(what, " ", path, ": no such file");
  std::string file = path;
  if (fs::is_directory(path)) {
    file = find_tokenizer_file(path);
    if (file.empty())
      fail(what, " ", path, ": directory has no tokenizer (tokenizer.json, vocab.json, tokenizer.model or *.tiktoken)");
  }
  std::vector<std::string> files = {file};
  if (fs::path(file).filename() == "vocab.json") {
    const std::string merges = (fs::path(file).parent_path() / "merges.txt").string();
    if (!fs::exists(merges)) fail(what, " ", file, ": merges.txt is missing beside it");
    files.push_back(merges);
  }
  return files;
}

std::string tokenizer_sha256(const std::vector<std::string>& files) {
  if (files.size() == 1) return sha256_file(files.front());
  std::string hashes;
  for (const auto& f : files) hashes += sha256_file(f);
  return sha256_bytes(hashes.data(), hashes.size());
}

std::vector<std::string> copy_tokenizer_files(const std::vector<std::string>& files, const std::string& dir) {
  fs::create_directories(dir);
  std::vector<std::string> copies;
  for (const auto& file : files) {
    copies.push_back((fs::path(dir) / fs::path(file).filename()).string());
    write_file_durable(copies.back(), read_file(file));
  }
  return copies;
}

}  // namespace sinklm

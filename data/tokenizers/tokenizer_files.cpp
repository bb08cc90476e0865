#include "data/tokenizers/tokenizer_files.h"

#include <filesystem>

#include "core/files/atomic_dir.h"
#include "core/error.h"
#include "core/files/sha256.h"
#include "data/io/read_file.h"

namespace fs = std::filesystem;

namespace sinklm {

std::vector<std::string> tokenizer_files(const std::string& path, const std::string& what) {
  if (!fs::exists(path)) fail(what, " ", path, ": no such file");
  std::string file = path;
  if (fs::is_directory(path)) {
    file.clear();
    for (const char* name : {"tokenizer.json", "vocab.json", "tokenizer.model"})
      if (fs::exists(fs::path(path) / name)) {
        file = (fs::path(path) / name).string();
        break;
      }
    if (file.empty()) fail(what, " ", path, ": directory has no tokenizer.json, vocab.json or tokenizer.model");
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

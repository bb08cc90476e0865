// A fresh temporary directory per test, removed afterwards.
#pragma once
#include <unistd.h>

#include <filesystem>
#include <string>

namespace sinklm::testing {

class TestDir {
 public:
  TestDir() {
    std::string pattern = (std::filesystem::temp_directory_path() / "sinklm-data-test-XXXXXX").string();
    path_ = ::mkdtemp(pattern.data());
  }
  ~TestDir() { std::filesystem::remove_all(path_); }
  std::string operator/(const std::string& name) const { return path_ + "/" + name; }
  const std::string& path() const { return path_; }

 private:
  std::string path_;
};

}  // namespace sinklm::testing

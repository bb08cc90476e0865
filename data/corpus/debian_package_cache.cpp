#include "data/corpus/debian_package_cache.h"

#include <cstdio>
#include <filesystem>
#include <sys/wait.h>

#include "core/error.h"

namespace fs = std::filesystem;

namespace sinklm {

std::string shell_quote(const std::string& word) {
  std::string out = "'";
  for (char c : word) out += c == '\'' ? std::string("'\\''") : std::string(1, c);
  return out + "'";
}

std::string shell_output(const std::string& command, const std::string& hint) {
  FILE* pipe = ::popen(command.c_str(), "r");
  if (!pipe) fail("cannot run `", command, "`");
  std::string out;
  char buffer[1 << 16];
  for (size_t n; (n = std::fread(buffer, 1, sizeof(buffer), pipe)) > 0;) out.append(buffer, n);
  int status = ::pclose(pipe);
  if (status != 0) fail("`", command, "` failed (exit status ", WEXITSTATUS(status), "); ", hint);
  return out;
}

void run_shell(const std::string& command, const std::string& hint) { shell_output(command, hint); }

DebianPackageCache::DebianPackageCache(std::string dir) : dir_(std::move(dir)) { fs::create_directories(dir_); }

std::string DebianPackageCache::deb_file(const std::string& package) {
  auto find = [&]() -> std::string {
    for (const auto& entry : fs::directory_iterator(dir_)) {
      std::string name = entry.path().filename().string();
      if (name.rfind(package + "_", 0) == 0 && entry.path().extension() == ".deb") return entry.path().string();
    }
    return "";
  };
  std::string found = find();
  if (!found.empty()) return found;
  run_shell(str("cd ", shell_quote(dir_), " && apt-get download -q ", shell_quote(package), " 2>&1"),
            str("is package '", package, "' known to apt? try `apt-get update` and `apt-cache show ", package, "`"));
  found = find();
  if (found.empty()) fail(dir_, ": apt-get download ", package, " left no ", package, "_*.deb");
  return found;
}

std::string DebianPackageCache::unpacked(const std::string& package) {
  std::string target = (fs::path(dir_) / "unpacked" / package).string();
  std::string done_marker = target + ".done";
  if (fs::exists(done_marker)) return target;
  std::string deb = deb_file(package);
  fs::remove_all(target);
  fs::create_directories(target);
  run_shell(str("dpkg-deb -x ", shell_quote(deb), " ", shell_quote(target), " 2>&1"),
            str(deb, " may be a partial download; delete it and run again"));
  std::FILE* marker = std::fopen(done_marker.c_str(), "w");
  if (marker) std::fclose(marker);
  return target;
}

std::string DebianPackageCache::version(const std::string& package) {
  std::string out = shell_output(str("dpkg-deb -f ", shell_quote(deb_file(package)), " Version"), "unreadable .deb");
  while (!out.empty() && (out.back() == '\n' || out.back() == '\r')) out.pop_back();
  return out;
}

}  // namespace sinklm

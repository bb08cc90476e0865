// Debian packages fetched by name without installing them: `apt-get download` puts the .deb in a cache
// directory and `dpkg-deb -x` unpacks it beside, so no dependencies (dictd, readline, ...) get installed.
// Both steps are skipped when their result is already in the cache.
#pragma once
#include <string>

namespace sinklm {

class DebianPackageCache {
 public:
  explicit DebianPackageCache(std::string dir);

  // The directory the package's files are unpacked into (its root, i.e. containing usr/...).
  std::string unpacked(const std::string& package);
  // The version of the cached .deb ("4.38"), for the manifest.
  std::string version(const std::string& package);

 private:
  std::string deb_file(const std::string& package);
  std::string dir_;
};

// Run a command through /bin/sh; UserError with the command and `hint` when it exits non-zero.
void run_shell(const std::string& command, const std::string& hint);
// The command's standard output; UserError as above.
std::string shell_output(const std::string& command, const std::string& hint);
std::string shell_quote(const std::string& word);

}  // namespace sinklm

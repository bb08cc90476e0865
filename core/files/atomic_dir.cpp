#include "core/files/atomic_dir.h"

#include <fcntl.h>
#include <stdio.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>

#include "core/error.h"

namespace fs = std::filesystem;

namespace sinklm {
namespace {

std::string errno_text() { return std::strerror(errno); }

void fsync_path(const std::string& path, int flags) {
  int fd = ::open(path.c_str(), flags);
  if (fd < 0) fail_storage(errno, path, ": cannot open for fsync: ", errno_text());
  const int rc = ::fsync(fd), error = errno;
  ::close(fd);
  if (rc != 0) fail_storage(error, path, ": fsync failed: ", std::strerror(error));
}

}  // namespace

void write_file_durable(const std::string& path, const void* data, size_t size) {
  int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0) fail_storage(errno, path, ": cannot create: ", errno_text());
  const char* bytes = static_cast<const char*>(data);
  while (size > 0) {
    ssize_t wrote = ::write(fd, bytes, size);
    if (wrote < 0 && errno == EINTR) continue;
    if (wrote <= 0) {
      const int error = wrote < 0 ? errno : ENOSPC;  // a write of 0 bytes: no room
      ::close(fd);
      fail_storage(error, path, ": write failed: ", std::strerror(error), " (is the disk full?)");
    }
    bytes += wrote;
    size -= static_cast<size_t>(wrote);
  }
  if (::fsync(fd) != 0 || ::close(fd) != 0) fail_storage(errno, path, ": fsync/close failed: ", errno_text());
}

void write_file_durable(const std::string& path, const std::string& text) {
  write_file_durable(path, text.data(), text.size());
}

void fsync_directory(const std::string& path) { fsync_path(path, O_RDONLY | O_DIRECTORY); }

void write_file_atomic(const std::string& path, const std::string& text) {
  const std::string staging = path + ".tmp-" + std::to_string(::getpid());
  write_file_durable(staging, text);
  if (::rename(staging.c_str(), path.c_str()) != 0) {
    const int error = errno;
    fs::remove(staging);
    fail_storage(error, path, ": cannot replace: ", std::strerror(error));
  }
  const fs::path parent = fs::path(path).parent_path();
  fsync_directory(parent.empty() ? "." : parent.string());
}

AtomicDirWriter::AtomicDirWriter(std::string final_dir, const std::string& staging_suffix, Staging staging)
    : final_(std::move(final_dir)), mode_(staging) {
  while (!final_.empty() && final_.back() == '/') final_.pop_back();
  if (final_.empty()) fail("output directory: empty path");
  fs::path parent = fs::path(final_).parent_path();
  if (!parent.empty()) fs::create_directories(parent);
  staging_ = final_ + (staging_suffix.empty() ? ".tmp-" + std::to_string(::getpid()) : staging_suffix);
  if (mode_ == Staging::Keep) {
    fs::create_directories(staging_);
    return;
  }
  fs::remove_all(staging_);
  if (!fs::create_directory(staging_)) fail(staging_, ": cannot create staging directory");
}

AtomicDirWriter::~AtomicDirWriter() {
  if (!committed_ && mode_ == Staging::Fresh) {
    std::error_code ignored;
    fs::remove_all(staging_, ignored);
  }
}

void AtomicDirWriter::commit() {
  SINKLM_ASSERT(!committed_);
  fsync_directory(staging_);
  std::string parent = fs::path(final_).parent_path().string();
  if (parent.empty()) parent = ".";
  if (fs::exists(final_)) {
    // Swap in one step: the old directory stays complete until the new one is in place.
    if (::renameat2(AT_FDCWD, staging_.c_str(), AT_FDCWD, final_.c_str(), RENAME_EXCHANGE) != 0)
      fail(final_, ": cannot replace existing directory: ", errno_text());
    fs::remove_all(staging_);  // now holds the previous contents
  } else if (::rename(staging_.c_str(), final_.c_str()) != 0) {
    fail(final_, ": cannot move staging directory into place: ", errno_text());
  }
  fsync_directory(parent);
  committed_ = true;
}

}  // namespace sinklm

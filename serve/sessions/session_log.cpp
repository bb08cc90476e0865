#include "serve/sessions/session_log.h"

#include <fcntl.h>
#include <unistd.h>
#include <zlib.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>

#include "core/files/atomic_dir.h"
#include "core/error.h"

namespace sinklm {
namespace {

constexpr char kMagic[8] = {'S', 'L', 'M', 'T', 'O', 'K', 'S', '1'};
constexpr size_t kRecordHeader = 8;  // u32 count, u32 crc

uint32_t get_u32(const char* p) {
  uint32_t v = 0;
  for (int i = 3; i >= 0; --i) v = (v << 8) | static_cast<unsigned char>(p[i]);
  return v;
}

void put_u32(std::string& out, uint32_t v) {
  for (int i = 0; i < 4; ++i) out.push_back(static_cast<char>((v >> (8 * i)) & 0xff));
}

std::string read_all(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) fail(path, ": cannot open the session log");
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

// Walks the whole records of a log's bytes, calling `each(payload, count)`; returns the end of the last one.
template <typename Each>
size_t scan_records(const std::string& bytes, const std::string& path, Each each) {
  if (bytes.size() < sizeof(kMagic) || std::memcmp(bytes.data(), kMagic, sizeof(kMagic)) != 0)
    fail(path, ": not a sinklm session log (bad header)");
  size_t at = sizeof(kMagic);
  while (at + kRecordHeader <= bytes.size()) {
    const uint32_t count = get_u32(bytes.data() + at), crc = get_u32(bytes.data() + at + 4);
    const size_t payload = static_cast<size_t>(count) * 4;
    if (count == 0 || at + kRecordHeader + payload > bytes.size()) break;
    const char* data = bytes.data() + at + kRecordHeader;
    if (crc32(0L, reinterpret_cast<const Bytef*>(data), payload) != crc) break;
    each(data, count);
    at += kRecordHeader + payload;
  }
  return at;
}

std::string errno_text() { return std::strerror(errno); }

}  // namespace

void SessionLog::create(const std::string& path) {
  write_file_durable(path, kMagic, sizeof(kMagic));
  fsync_directory(std::filesystem::path(path).parent_path().string());
}

SessionLog::SessionLog(std::string path) : path_(std::move(path)) {
  const std::string bytes = read_all(path_);
  const size_t end = scan_records(bytes, path_, [&](const char*, uint32_t count) { tokens_ += count; });
  torn_bytes_ = static_cast<int64_t>(bytes.size() - end);
  fd_ = ::open(path_.c_str(), O_WRONLY | O_CLOEXEC);
  if (fd_ < 0) fail_storage(errno, path_, ": cannot open for appending: ", errno_text());
  if (torn_bytes_ > 0 && (::ftruncate(fd_, end) != 0 || ::fsync(fd_) != 0))
    fail_storage(errno, path_, ": cannot cut the torn tail: ", errno_text());
  if (::lseek(fd_, 0, SEEK_END) < 0) fail(path_, ": seek failed: ", errno_text());
  written_ = synced_ = end;
}

SessionLog::~SessionLog() {
  if (fd_ >= 0) ::close(fd_);
}

void SessionLog::append(const std::vector<int64_t>& ids) {
  if (ids.empty()) return;
  std::string payload;
  payload.reserve(ids.size() * 4);
  for (int64_t id : ids) {
    SINKLM_ASSERT(id >= 0 && id <= UINT32_MAX, "token id ", id);
    put_u32(payload, static_cast<uint32_t>(id));
  }
  std::string record;
  put_u32(record, static_cast<uint32_t>(ids.size()));
  put_u32(record, static_cast<uint32_t>(crc32(0L, reinterpret_cast<const Bytef*>(payload.data()), payload.size())));
  record += payload;
  std::lock_guard<std::mutex> lock(mutex_);
  for (size_t done = 0; done < record.size();) {  // one write(2) in practice; a short write continues it
    const ssize_t n = ::write(fd_, record.data() + done, record.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) fail_storage(n < 0 ? errno : ENOSPC, path_, ": append failed: ", n < 0 ? errno_text() : "no room", " (is the disk full?)");
    done += static_cast<size_t>(n);
  }
  written_ += record.size();
  tokens_ += static_cast<int64_t>(ids.size());
}

void SessionLog::sync() {
  std::lock_guard<std::mutex> one_at_a_time(sync_mutex_);
  uint64_t target;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    if (synced_ >= written_) return;
    target = written_;
  }
  if (::fdatasync(fd_) != 0) fail_storage(errno, path_, ": fsync failed: ", errno_text());
  std::lock_guard<std::mutex> lock(mutex_);
  synced_ = std::max(synced_, target);
}

int64_t SessionLog::size() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return tokens_;
}

std::vector<int64_t> SessionLog::read(const std::string& path, int64_t from) {
  std::vector<int64_t> out;
  int64_t position = 0;
  scan_records(read_all(path), path, [&](const char* data, uint32_t count) {
    for (uint32_t i = 0; i < count; ++i, ++position)
      if (position >= from) out.push_back(get_u32(data + 4 * i));
  });
  return out;
}

}  // namespace sinklm

// The append-only token log of one session: every token its stream accepts or generates, in stream order
// (the sink prefix, each prompt, each sampled token), so the session can be rebuilt after a crash by
// replaying the log from its newest snapshot (serve/sessions/session_store.h).
//
// On-disk format, `<session dir>/tokens.log`, little-endian:
//   header   8 bytes  "SLMTOKS1"
//   records  u32 count (>= 1), u32 CRC-32 (zlib) of the payload, payload: count x u32 token id
// One append() is one record, written with one write(2). A record is whole or it is a torn tail (a crash or
// power cut mid-write): its length runs past the end of the file or its checksum fails; opening the log
// cuts the file at the last whole record. Token i of the log is stream position i.
//
// Durability: append() reaches the page cache (it survives the process being killed); sync() fsyncs, and a
// response carrying tokens is sent only after a sync() that covers them. Concurrent sync() calls share one
// fsync (group commit).
#pragma once
#include <cstdint>
#include <mutex>
#include <string>
#include <vector>

namespace sinklm {

class SessionLog {
 public:
  // Creates an empty log (header only), fsync'ed with its directory.
  static void create(const std::string& path);
  // Opens a log for appending after reading its records. A torn tail is cut off; torn_bytes() says how much.
  // UserError when the file is missing or its header is not a log's.
  explicit SessionLog(std::string path);
  ~SessionLog();
  SessionLog(const SessionLog&) = delete;
  SessionLog& operator=(const SessionLog&) = delete;

  void append(const std::vector<int64_t>& ids);
  void sync();
  int64_t size() const;  // tokens logged
  // Tokens [from, size()) read back from the file.
  std::vector<int64_t> read_from(int64_t from) const { return read(path_, from); }
  // Tokens [from, end) of the whole records of the log at `path` (safe while another process appends).
  static std::vector<int64_t> read(const std::string& path, int64_t from = 0);
  int64_t torn_bytes() const { return torn_bytes_; }
  const std::string& path() const { return path_; }

 private:
  std::string path_;
  int fd_ = -1;
  mutable std::mutex mutex_;  // tokens_, written_
  std::mutex sync_mutex_;     // one fsync at a time; the others wait and usually find their bytes synced
  int64_t tokens_ = 0;
  uint64_t written_ = 0, synced_ = 0;  // bytes appended / known durable
  int64_t torn_bytes_ = 0;
};

}  // namespace sinklm

// Sessions: token streams that outlive a request, so one conversation keeps its KV cache across requests
// and runs indefinitely in the constant memory of its cache policy, and survives a crash.
//
// Durability. Every session is a directory `dir`/<id>/ holding
//   tokens.log         every token of its stream, append-only, checksummed records (serve/sessions/session_log.h)
//   snapshot-<L>/      KV snapshots at stream length L, the newest `keep_snapshots` (serve/sessions/session_snapshot.h)
// The server appends a request's prompt when it accepts it and each sampled token as it is produced, and
// fsyncs the log (sync_log) before any response data carrying those tokens is sent: a client that received
// a token (a whole response, or one streamed chunk) finds it in the session after a crash, SIGKILL or power
// cut. After a request, when `snapshot_every` tokens have been streamed since the last snapshot, a new one is
// written (atomically). A session is rebuilt from its newest usable snapshot plus the logged tokens after it:
// those become the session's `unfed` tokens, which the next request feeds first through the same batched
// forward pass as its prompt (so "replay" is ordinary prefill; the rebuilt cache equals the uninterrupted
// one, tested). With no usable snapshot the whole log is replayed.
//
// At start every session's log is opened (a torn tail is cut, with a warning naming the session); sessions
// are rebuilt when first used. At most `max_in_memory` sessions stay loaded; the least recently used idle one
// is snapshotted and dropped from memory. `max_sessions` bounds the total.
#pragma once
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "decode/cached_decoder.h"
#include "serve/sessions/session_log.h"

namespace sinklm {

struct Session {
  std::string id;
  std::unique_ptr<DecoderStream> stream;
  std::unique_ptr<SessionLog> log;
  // Logged but not yet in the cache: the last token sampled in the previous reply, or after a restart every
  // token after the snapshot. The next request feeds them first. Invariant: log = cache tokens + unfed.
  std::vector<int64_t> unfed;
  bool busy = false;  // a request is using it
  uint64_t last_used = 0;
  int64_t snapshot_length = 0;  // stream length of its newest snapshot
};

struct StreamSettings {  // how new streams are made
  CacheOptions cache;
  KeyRotation rotation = KeyRotation::Relative;
};

struct SessionDurability {
  int64_t snapshot_every = 1024;  // tokens streamed between snapshots
  int keep_snapshots = 2;         // the previous one is the fallback when the newest is corrupt
};

class SessionStore {
 public:
  SessionStore(std::string dir, int64_t max_in_memory, int64_t max_sessions, StreamSettings settings,
               const ModelConfig& model, torch::Device device, SessionDurability durability = {});

  std::string create();  // durable before it returns; RequestError 429 when max_sessions exist
  // Marks the session busy for one request, rebuilding it from disk if needed. RequestError 404 for an
  // unknown id, 409 while another request uses it.
  std::shared_ptr<Session> acquire(const std::string& id);
  // After a request that used the session: fsyncs its log and writes a snapshot when one is due. The
  // session stays busy; release() hands it back.
  void finish_request(Session& session);
  // Idle again; may move least recently used idle sessions to disk.
  void release(const std::shared_ptr<Session>& session);
  bool remove(const std::string& id);
  void save_all();  // a snapshot of every loaded idle session (at shutdown: a quick restart replays nothing)
  // Every token of a session's stream as logged (for GET /v1/sessions/{id}); RequestError 404 when unknown.
  std::vector<int64_t> history(const std::string& id) const;

  std::unique_ptr<DecoderStream> new_stream() const;
  const StreamSettings& settings() const { return settings_; }
  int64_t in_memory() const;
  int64_t on_disk() const;
  KvUsage idle_kv() const;  // K/V held by loaded sessions that are not generating

 private:
  void save(Session& session) const;
  std::shared_ptr<Session> load(const std::string& id) const;
  void evict_idle_locked();
  std::string path_of(const std::string& id) const;
  std::string log_path(const std::string& id) const;

  std::string dir_;
  int64_t max_in_memory_, max_sessions_;
  StreamSettings settings_;
  const ModelConfig& model_;
  torch::Device device_;
  SessionDurability durability_;
  mutable std::mutex mutex_;
  std::map<std::string, std::shared_ptr<Session>> loaded_;
  std::map<std::string, bool> known_;  // every session id, loaded or on disk
  uint64_t clock_ = 0;
};

}  // namespace sinklm

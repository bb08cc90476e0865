// Sessions: token streams that outlive a request, so one conversation keeps its KV cache across requests
// and runs indefinitely in the constant memory of its cache policy.
//
// At most `max_in_memory` sessions stay loaded; when more are needed, the least recently used idle one is
// written to `dir`/<id>/ (state.json + kv.pt, atomically) and dropped from memory; the next request for it
// restores it transparently. Sessions on disk survive a server restart. `max_sessions` bounds the total.
#pragma once
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "serve/cached_decoder.h"

namespace sinklm {

struct Session {
  std::string id;
  std::unique_ptr<DecoderStream> stream;
  std::vector<int64_t> unfed;  // sampled at the end of the last reply but not yet in the cache
  bool busy = false;           // a request is using it
  uint64_t last_used = 0;
};

struct StreamSettings {  // how new streams are made
  CacheOptions cache;
  KeyRotation rotation = KeyRotation::Relative;
};

class SessionStore {
 public:
  SessionStore(std::string dir, int64_t max_in_memory, int64_t max_sessions, StreamSettings settings,
               const ModelConfig& model, torch::Device device);

  std::string create();  // RequestError 429 when max_sessions exist
  // Marks the session busy for one request, restoring it from disk if needed. RequestError 404 for an
  // unknown id, 409 while another request uses it.
  std::shared_ptr<Session> acquire(const std::string& id);
  // Idle again; may move least recently used idle sessions to disk.
  void release(const std::shared_ptr<Session>& session);
  bool remove(const std::string& id);
  void save_all();  // every loaded idle session to disk (at shutdown, so sessions survive a restart)

  std::unique_ptr<DecoderStream> new_stream() const;
  int64_t in_memory() const;
  int64_t on_disk() const;
  int64_t idle_kv_entries() const;  // KV entries held by loaded sessions that are not generating

 private:
  void save(const Session& session) const;
  std::shared_ptr<Session> load(const std::string& id) const;
  void evict_idle_locked();
  std::string path_of(const std::string& id) const;

  std::string dir_;
  int64_t max_in_memory_, max_sessions_;
  StreamSettings settings_;
  const ModelConfig& model_;
  torch::Device device_;
  mutable std::mutex mutex_;
  std::map<std::string, std::shared_ptr<Session>> loaded_;
  std::map<std::string, bool> known_;  // every session id, loaded or on disk
  uint64_t clock_ = 0;
};

}  // namespace sinklm

#include "serve/sessions/session_store.h"

#include <torch/torch.h>

#include <filesystem>
#include <cstdio>
#include <nlohmann/json.hpp>
#include <random>
#include <sstream>

#include "core/files/atomic_dir.h"
#include "serve/sessions/session_snapshot.h"
#include "serve/http/request_error.h"

namespace fs = std::filesystem;

namespace sinklm {
namespace {

bool valid_id(const std::string& id) {
  if (id.empty() || id.size() > 64) return false;
  for (char c : id)
    if (!std::isalnum(static_cast<unsigned char>(c)) && c != '-' && c != '_') return false;
  return true;
}

std::string random_id() {
  std::random_device device;
  std::ostringstream out;
  out << "sess_" << std::hex;
  for (int i = 0; i < 4; ++i) out << static_cast<uint32_t>(device());
  return out.str();
}

}  // namespace

SessionStore::SessionStore(std::string dir, int64_t max_in_memory, int64_t max_sessions, StreamSettings settings,
                           const ModelConfig& model, torch::Device device, SessionDurability durability)
    : dir_(std::move(dir)),
      max_in_memory_(max_in_memory),
      max_sessions_(max_sessions),
      settings_(std::move(settings)),
      model_(model),
      device_(device),
      durability_(durability) {
  if (max_in_memory < 1) fail("--sessions-in-memory must be at least 1");
  if (durability_.snapshot_every < 1 || durability_.keep_snapshots < 1)
    fail("--snapshot-every and the snapshots kept must be at least 1");
  fs::create_directories(dir_);
  for (const auto& entry : fs::directory_iterator(dir_)) {  // sessions of an earlier run, cleanly stopped or not
    const std::string id = entry.path().filename().string();
    if (!entry.is_directory() || !valid_id(id)) continue;
    if (!fs::exists(log_path(id))) {
      std::fprintf(stderr, "sinklm serve: warning: session %s: %s has no tokens.log; skipped\n", id.c_str(),
                   path_of(id).c_str());
      continue;
    }
    remove_snapshot_leftovers(path_of(id));
    SessionLog log(log_path(id));  // cuts a torn tail
    if (log.torn_bytes() > 0)
      std::fprintf(stderr,
                   "sinklm serve: warning: session %s: cut a torn tail of %lld bytes from %s (a crash mid-write); "
                   "the session resumes with its %lld whole logged tokens\n",
                   id.c_str(), static_cast<long long>(log.torn_bytes()), log.path().c_str(),
                   static_cast<long long>(log.size()));
    known_[id] = true;
  }
}

std::unique_ptr<DecoderStream> SessionStore::new_stream() const {
  return std::make_unique<DecoderStream>(make_cache_policy(settings_.cache, model_), settings_.cache.positions,
                                         settings_.rotation, model_, device_);
}

std::string SessionStore::create() {
  std::lock_guard<std::mutex> lock(mutex_);
  if (static_cast<int64_t>(known_.size()) >= max_sessions_)
    throw RequestError(429, "too_many_sessions",
                       str("the server holds its maximum of ", max_sessions_, " sessions; delete one (DELETE "
                           "/v1/sessions/{id}) or raise --max-sessions"));
  auto session = std::make_shared<Session>();
  do session->id = random_id();
  while (known_.count(session->id) || fs::exists(path_of(session->id)));
  try {
    fs::create_directories(path_of(session->id));
    SessionLog::create(log_path(session->id));
    fsync_directory(dir_);
    session->log = std::make_unique<SessionLog>(log_path(session->id));
  } catch (...) {  // a full disk: leave no half-made session for the next start to trip over
    std::error_code ignored;
    fs::remove_all(path_of(session->id), ignored);
    throw;
  }
  session->stream = new_stream();
  session->last_used = ++clock_;
  known_[session->id] = true;
  loaded_[session->id] = session;
  evict_idle_locked();
  return session->id;
}

std::shared_ptr<Session> SessionStore::acquire(const std::string& id) {
  std::lock_guard<std::mutex> lock(mutex_);
  if (!valid_id(id) || !known_.count(id))
    throw RequestError(404, "session_not_found",
                       str("session '", id, "' does not exist; create one with POST /v1/sessions"));
  auto it = loaded_.find(id);
  if (it == loaded_.end()) it = loaded_.emplace(id, load(id)).first;
  auto session = it->second;
  if (session->busy)
    throw RequestError(409, "session_busy", str("session '", id, "' is answering another request; retry after it"));
  session->busy = true;
  session->last_used = ++clock_;
  evict_idle_locked();
  return session;
}

void SessionStore::finish_request(Session& session) {
  session.log->sync();
  if (session.stream->length() - session.snapshot_length >= durability_.snapshot_every) save(session);
}

void SessionStore::release(const std::shared_ptr<Session>& session) {
  std::lock_guard<std::mutex> lock(mutex_);
  session->busy = false;
  session->last_used = ++clock_;
  if (known_.count(session->id)) evict_idle_locked();
}

bool SessionStore::remove(const std::string& id) {
  std::lock_guard<std::mutex> lock(mutex_);
  if (!valid_id(id) || !known_.count(id)) return false;
  auto it = loaded_.find(id);
  if (it != loaded_.end() && it->second->busy)
    throw RequestError(409, "session_busy", str("session '", id, "' is answering a request"));
  if (it != loaded_.end()) loaded_.erase(it);
  known_.erase(id);
  fs::remove_all(path_of(id));
  return true;
}

void SessionStore::save_all() {
  std::lock_guard<std::mutex> lock(mutex_);
  for (const auto& [id, s] : loaded_)
    if (!s->busy) save(*s);
}

std::vector<int64_t> SessionStore::history(const std::string& id) const {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    if (!valid_id(id) || !known_.count(id))
      throw RequestError(404, "session_not_found", str("session '", id, "' does not exist"));
  }
  return SessionLog::read(log_path(id));
}

void SessionStore::evict_idle_locked() {
  while (static_cast<int64_t>(loaded_.size()) > max_in_memory_) {
    std::shared_ptr<Session> oldest;
    for (const auto& [id, s] : loaded_)
      if (!s->busy && (!oldest || s->last_used < oldest->last_used)) oldest = s;
    if (!oldest) return;  // every loaded session is busy
    save(*oldest);
    loaded_.erase(oldest->id);
  }
}

std::string SessionStore::path_of(const std::string& id) const { return (fs::path(dir_) / id).string(); }
std::string SessionStore::log_path(const std::string& id) const { return path_of(id) + "/tokens.log"; }

// A snapshot of the cache (the log already holds every token); unfed tokens are not in it and stay in the log.
void SessionStore::save(Session& session) const {
  session.log->sync();
  if (session.stream->length() == session.snapshot_length) return;
  write_session_snapshot(path_of(session.id), *session.stream, durability_.keep_snapshots);
  session.snapshot_length = session.stream->length();
}

std::shared_ptr<Session> SessionStore::load(const std::string& id) const {
  try {
    auto session = std::make_shared<Session>();
    session->id = id;
    session->log = std::make_unique<SessionLog>(log_path(id));
    session->stream = read_session_snapshot(path_of(id), id, session->log->size(), settings_.rotation, model_, device_);
    if (!session->stream) session->stream = new_stream();  // no usable snapshot: replay the whole log
    session->snapshot_length = session->stream->length();
    session->unfed = session->log->read_from(session->stream->length());
    return session;
  } catch (const std::exception& e) {
    throw RequestError(500, "session_unreadable", str("session '", id, "': ", e.what()));
  }
}

int64_t SessionStore::in_memory() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return loaded_.size();
}

int64_t SessionStore::on_disk() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return known_.size() - loaded_.size();
}

KvUsage SessionStore::idle_kv() const {
  std::lock_guard<std::mutex> lock(mutex_);
  KvUsage usage;
  for (const auto& [id, s] : loaded_)
    if (!s->busy) usage.add(*s->stream);
  return usage;
}

}  // namespace sinklm

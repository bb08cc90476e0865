#include "serve/session_store.h"

#include <torch/torch.h>

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <random>
#include <sstream>

#include "core/atomic_dir.h"
#include "serve/request_error.h"

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
                           const ModelConfig& model, torch::Device device)
    : dir_(std::move(dir)),
      max_in_memory_(max_in_memory),
      max_sessions_(max_sessions),
      settings_(std::move(settings)),
      model_(model),
      device_(device) {
  if (max_in_memory < 1) fail("--sessions-in-memory must be at least 1");
  fs::create_directories(dir_);
  for (const auto& entry : fs::directory_iterator(dir_)) {  // sessions saved by an earlier run
    const std::string id = entry.path().filename().string();
    if (entry.is_directory() && valid_id(id) && fs::exists(entry.path() / "state.json")) known_[id] = true;
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
  while (known_.count(session->id));
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

void SessionStore::save(const Session& session) const {
  const auto& stream = *session.stream;
  CacheSnapshot snapshot = stream.snapshot();
  nlohmann::json state = {{"id", session.id},
                          {"cache", stream.policy().name()},
                          {"window", stream.policy().budget()},
                          {"sinks", stream.policy().sinks()},
                          {"positions", position_rule_name(stream.position_rule())},
                          {"stream_length", stream.length()},
                          {"held_tokens", std::vector<int64_t>(stream.held_tokens().begin(), stream.held_tokens().end())},
                          {"unfed", session.unfed}};
  AtomicDirWriter writer(path_of(session.id));
  std::vector<torch::Tensor> tensors = snapshot.keys;
  tensors.insert(tensors.end(), snapshot.values.begin(), snapshot.values.end());
  torch::save(tensors, writer.staging_path("kv.pt"));
  write_file_durable(writer.staging_path("state.json"), state.dump());
  writer.commit();
}

std::shared_ptr<Session> SessionStore::load(const std::string& id) const {
  const std::string dir = path_of(id);
  std::ifstream in(dir + "/state.json");
  if (!in) throw RequestError(500, "session_unreadable", str("session '", id, "': ", dir, "/state.json is missing"));
  try {
    auto state = nlohmann::json::parse(in);
    CacheOptions cache;
    cache.policy = state.at("cache").get<std::string>();
    cache.window = state.at("window").get<int64_t>();
    cache.sinks = state.at("sinks").get<int64_t>();
    auto policy = make_cache_policy(cache, model_, dir + "/state.json");
    CacheSnapshot snapshot;
    snapshot.stream_length = state.at("stream_length").get<int64_t>();
    if (!policy->recomputes()) {
      std::vector<torch::Tensor> tensors;
      torch::load(tensors, dir + "/kv.pt");
      const size_t layers = tensors.size() / 2;
      snapshot.keys.assign(tensors.begin(), tensors.begin() + layers);
      snapshot.values.assign(tensors.begin() + layers, tensors.end());
    }
    auto session = std::make_shared<Session>();
    session->id = id;
    session->unfed = state.at("unfed").get<std::vector<int64_t>>();
    session->stream = std::make_unique<DecoderStream>(
        std::move(policy), parse_position_rule(state.at("positions").get<std::string>()), settings_.rotation, model_,
        device_, snapshot, state.at("held_tokens").get<std::vector<int64_t>>());
    return session;
  } catch (const nlohmann::json::exception& e) {
    throw RequestError(500, "session_unreadable", str("session '", id, "': ", dir, "/state.json: ", e.what()));
  } catch (const c10::Error& e) {
    throw RequestError(500, "session_unreadable", str("session '", id, "': ", dir, "/kv.pt: ", e.what_without_backtrace()));
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

int64_t SessionStore::idle_kv_entries() const {
  std::lock_guard<std::mutex> lock(mutex_);
  int64_t total = 0;
  for (const auto& [id, s] : loaded_)
    if (!s->busy) total += s->stream->entries();
  return total;
}

}  // namespace sinklm

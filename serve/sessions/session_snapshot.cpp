#include "serve/sessions/session_snapshot.h"

#include <torch/torch.h>

#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "core/files/atomic_dir.h"
#include "core/error.h"
#include "core/files/sha256.h"

namespace fs = std::filesystem;

namespace sinklm {
namespace {

constexpr const char* kPrefix = "snapshot-";
constexpr size_t kDigits = 12;

std::string snapshot_dir(const std::string& session_dir, int64_t length) {
  std::string digits = std::to_string(length);
  return (fs::path(session_dir) / (kPrefix + std::string(kDigits - std::min(kDigits, digits.size()), '0') + digits)).string();
}

// The stream length of a committed snapshot directory's name, or -1.
int64_t length_of(const std::string& name) {
  const size_t prefix = std::string(kPrefix).size();
  if (name.size() != prefix + kDigits || name.rfind(kPrefix, 0) != 0) return -1;
  for (size_t i = prefix; i < name.size(); ++i)
    if (!std::isdigit(static_cast<unsigned char>(name[i]))) return -1;
  return std::stoll(name.substr(prefix));
}

std::unique_ptr<DecoderStream> read_one(const std::string& dir, KeyRotation rotation, const ModelConfig& model,
                                        torch::Device device) {
  std::ifstream in(dir + "/state.json");
  if (!in) fail(dir, "/state.json is missing");
  const auto state = nlohmann::json::parse(in);
  auto policy = make_cache_policy(cache_options_from_json(state, dir + "/state.json"), model, dir + "/state.json");
  CacheSnapshot snapshot;
  snapshot.stream_length = state.at("stream_length").get<int64_t>();
  snapshot.format = policy->kv_format();  // state.json's kv_dtype: the format of the cache kv.pt was taken from
  if (!policy->recomputes()) {
    const std::string kv = dir + "/kv.pt";
    if (sha256_file(kv) != state.at("kv_sha256").get<std::string>()) fail(kv, ": sha256 differs from state.json");
    std::vector<torch::Tensor> tensors;
    torch::load(tensors, kv);
    const size_t layers = tensors.size() / 2;
    for (const auto& t : tensors)
      if (t.scalar_type() != torch::kFloat32) fail(kv, ": holds ", t.scalar_type(), " tensors, snapshots are float32");
    snapshot.keys.assign(tensors.begin(), tensors.begin() + layers);
    snapshot.values.assign(tensors.begin() + layers, tensors.end());
  }
  return std::make_unique<DecoderStream>(std::move(policy), parse_position_rule(state.at("positions").get<std::string>()),
                                         rotation, model, device, snapshot,
                                         state.at("held_tokens").get<std::vector<int64_t>>());
}

}  // namespace

std::vector<int64_t> session_snapshot_lengths(const std::string& session_dir) {
  std::vector<int64_t> lengths;
  if (!fs::is_directory(session_dir)) return lengths;
  for (const auto& entry : fs::directory_iterator(session_dir)) {
    const int64_t length = length_of(entry.path().filename().string());
    if (length >= 0 && entry.is_directory()) lengths.push_back(length);
  }
  std::sort(lengths.begin(), lengths.end());
  return lengths;
}

void write_session_snapshot(const std::string& session_dir, const DecoderStream& stream, int keep) {
  const auto lengths = session_snapshot_lengths(session_dir);
  if (lengths.empty() || lengths.back() != stream.length()) {
    // state.json and kv.pt as in serve/sessions/session_snapshot.h.
    nlohmann::json state = cache_policy_json(stream.policy());
    state.update({{"format", 1},
                  {"positions", position_rule_name(stream.position_rule())},
                  {"stream_length", stream.length()},
                  {"held_tokens", std::vector<int64_t>(stream.held_tokens().begin(), stream.held_tokens().end())}});
    AtomicDirWriter writer(snapshot_dir(session_dir, stream.length()));
    if (!stream.policy().recomputes()) {
      const CacheSnapshot snapshot = stream.snapshot();
      std::vector<torch::Tensor> tensors = snapshot.keys;
      tensors.insert(tensors.end(), snapshot.values.begin(), snapshot.values.end());
      std::ostringstream bytes;
      torch::save(tensors, bytes);
      const std::string kv = bytes.str();
      write_file_durable(writer.staging_path("kv.pt"), kv);
      state["kv_sha256"] = sha256_bytes(kv.data(), kv.size());
    }
    write_file_durable(writer.staging_path("state.json"), state.dump());
    if (const char* fault = std::getenv("SINKLM_FAULT_KILL_IN_SNAPSHOT"); fault && std::string(fault) == "1")
      std::raise(SIGKILL);
    writer.commit();
  }
  auto kept = session_snapshot_lengths(session_dir);
  for (size_t i = 0; i + keep < kept.size(); ++i) fs::remove_all(snapshot_dir(session_dir, kept[i]));
}

std::unique_ptr<DecoderStream> read_session_snapshot(const std::string& session_dir, const std::string& session,
                                                     int64_t max_length, KeyRotation rotation,
                                                     const ModelConfig& model, torch::Device device) {
  const auto lengths = session_snapshot_lengths(session_dir);
  for (auto it = lengths.rbegin(); it != lengths.rend(); ++it) {
    if (*it > max_length) continue;
    const std::string dir = snapshot_dir(session_dir, *it);
    try {
      return read_one(dir, rotation, model, device);
    } catch (const std::exception& e) {  // parse errors, torch::load errors, sha256 or shape mismatches
      std::fprintf(stderr, "sinklm serve: warning: session %s: snapshot %s is unusable (%s); trying an older one\n",
                   session.c_str(), dir.c_str(), e.what());
    }
  }
  return nullptr;
}

void remove_snapshot_leftovers(const std::string& session_dir) {
  for (const auto& entry : fs::directory_iterator(session_dir)) {
    const std::string name = entry.path().filename().string();
    if (name.rfind(kPrefix, 0) == 0 && length_of(name) < 0) fs::remove_all(entry.path());
  }
}

}  // namespace sinklm

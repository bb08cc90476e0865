#include "data/shards/mixture_loader.h"

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <map>
#include <set>

#include "core/error.h"
#include "core/seeded_random.h"

namespace sinklm {

namespace {

std::string trimmed(const std::string& s) {
  const size_t first = s.find_first_not_of(" \t"), last = s.find_last_not_of(" \t");
  return first == std::string::npos ? "" : s.substr(first, last - first + 1);
}

// Metric names: each directory's last component, or its whole path where two would clash.
void name_sources(std::vector<MixtureSource>& sources) {
  std::map<std::string, int> uses;
  auto base = [](const std::string& dir) {
    const std::string name = std::filesystem::path(dir).lexically_normal().filename().string();
    return name.empty() ? std::filesystem::path(dir).lexically_normal().parent_path().filename().string() : name;
  };
  for (const auto& s : sources) ++uses[base(s.shards)];
  for (auto& s : sources) s.name = uses[base(s.shards)] > 1 ? s.shards : base(s.shards);
}

}  // namespace

std::vector<MixtureSource> parse_mixture(const std::string& text, const std::string& where) {
  std::vector<MixtureSource> sources;
  std::set<std::string> seen;
  size_t start = 0;
  while (start <= text.size()) {
    const size_t comma = std::min(text.find(',', start), text.size());
    const std::string entry = trimmed(text.substr(start, comma - start));
    start = comma + 1;
    const size_t eq = entry.rfind('=');
    if (entry.empty() || eq == std::string::npos || eq == 0)
      fail(where, ": data.mixture entry '", entry, "' is not DIR=WEIGHT (e.g. data.mixture: \"shards/web=0.8, "
           "shards/code=0.2\")");
    MixtureSource s{trimmed(entry.substr(0, eq)), 0, ""};
    const std::string weight = trimmed(entry.substr(eq + 1));
    char* end = nullptr;
    s.weight = std::strtod(weight.c_str(), &end);
    if (weight.empty() || *end != '\0' || !(s.weight > 0) || !std::isfinite(s.weight))
      fail(where, ": data.mixture: the weight of ", s.shards, " is '", weight, "'; each weight must be a positive "
           "number (leave a source out rather than give it weight 0)");
    if (!seen.insert(s.shards).second) fail(where, ": data.mixture lists ", s.shards, " twice; give it one weight");
    sources.push_back(s);
  }
  name_sources(sources);
  return sources;
}

MixtureLoader::MixtureLoader(std::vector<MixtureSource> sources, Split split, const LoaderOptions& options)
    : sources_(std::move(sources)), options_(options), drawn_(sources_.size(), 0) {
  SINKLM_ASSERT(!sources_.empty(), "a mixture without sources");
  double total = 0;
  for (const auto& s : sources_) total += s.weight;
  double sum = 0;
  for (size_t i = 0; i < sources_.size(); ++i) {
    LoaderOptions own = options;
    if (i > 0) own.seed = splitmix64(options.seed + i);  // source 0 keeps the run's seed: one source = TokenLoader
    loaders_.push_back(TokenLoader::open(sources_[i].shards, split, own));
    sum += sources_[i].weight;
    cumulative_.push_back(i + 1 == sources_.size() ? 1.0 : sum / total);
  }
  draw_seed_ = splitmix64(options.seed ^ 0x6d69787475726521ULL);  // "mixture!": apart from the permutations' seeds
}

size_t MixtureLoader::source_of(uint64_t stream_position) const {
  if (sources_.size() == 1) return 0;
  const double u = static_cast<double>(splitmix64(draw_seed_ ^ splitmix64(stream_position)) >> 11) * 0x1.0p-53;
  return static_cast<size_t>(std::upper_bound(cumulative_.begin(), cumulative_.end(), u) - cumulative_.begin());
}

std::vector<uint32_t> MixtureLoader::next_batch() {
  const uint64_t local = static_cast<uint64_t>(options_.global_batch / options_.world_size);
  const uint64_t mine = static_cast<uint64_t>(options_.rank) * local;
  std::vector<uint32_t> batch;
  batch.reserve(static_cast<size_t>(local * static_cast<uint64_t>(options_.seq_len)));
  for (uint64_t row = 0; row < static_cast<uint64_t>(options_.global_batch); ++row) {
    const size_t s = source_of(position_ + row);
    const uint64_t n = drawn_[s]++;
    if (row < mine || row >= mine + local) continue;
    const std::vector<uint32_t> sample = loaders_[s].sample_at(n);
    batch.insert(batch.end(), sample.begin(), sample.end());
  }
  position_ += static_cast<uint64_t>(options_.global_batch);
  return batch;
}

std::vector<uint64_t> MixtureLoader::tokens_drawn() const {
  const uint64_t text = static_cast<uint64_t>(options_.seq_len) - options_.sink_ids.size();
  std::vector<uint64_t> tokens;
  for (uint64_t n : drawn_) tokens.push_back(n * text);
  return tokens;
}

nlohmann::json MixtureLoader::cursor() const {
  auto source_cursor = [&](size_t i) {
    LoaderCursor c = loaders_[i].cursor();
    c.position = drawn_[i];
    return nlohmann::json::parse(c.to_json());
  };
  if (sources_.size() == 1) return source_cursor(0);
  nlohmann::json list = nlohmann::json::array();
  const std::vector<uint64_t> tokens = tokens_drawn();
  for (size_t i = 0; i < sources_.size(); ++i)
    list.push_back({{"shards", sources_[i].shards}, {"weight", sources_[i].weight}, {"tokens", tokens[i]},
                    {"cursor", source_cursor(i)}});
  return {{"mixture", {{"position", position_}, {"seed", options_.seed}, {"sources", list}}}};
}

void MixtureLoader::restore(const nlohmann::json& cursor, const std::string& where) {
  const bool mixture = cursor.contains("mixture");
  if (mixture != (sources_.size() > 1))
    fail(where, ": the checkpoint's data is ", mixture ? "a mixture (data.mixture)" : "one directory (data.shards)",
         " but this run's is ", sources_.size() > 1 ? "a mixture" : "one directory", "; resume with the same data");
  if (!mixture) {
    loaders_[0].restore(LoaderCursor::from_json(cursor.dump(), where));
    drawn_[0] = position_ = loaders_[0].cursor().position;
    return;
  }
  try {
    const nlohmann::json& m = cursor.at("mixture");
    const nlohmann::json& list = m.at("sources");
    bool same = list.size() == sources_.size() && m.at("seed").get<uint64_t>() == options_.seed;
    for (size_t i = 0; same && i < sources_.size(); ++i)
      same = list[i].at("shards").get<std::string>() == sources_[i].shards &&
             list[i].at("weight").get<double>() == sources_[i].weight;
    if (!same)
      fail(where, ": the checkpoint's mixture (", m.at("sources").dump(), ", seed ", m.at("seed").dump(),
           ") is not this run's data.mixture and data.seed; resume with the same");
    for (size_t i = 0; i < sources_.size(); ++i) {
      loaders_[i].restore(LoaderCursor::from_json(list[i].at("cursor").dump(), where));
      drawn_[i] = loaders_[i].cursor().position;
    }
    position_ = m.at("position").get<uint64_t>();
  } catch (const nlohmann::json::exception& e) {
    fail(where, ": not a mixture cursor: ", e.what());
  }
}

}  // namespace sinklm

#include "decode/cache/head_roles.h"

#include <algorithm>
#include <fstream>
#include <set>

#include "core/error.h"

namespace sinklm {

constexpr const char* kFormat = "sinklm-head-policy";

int64_t HeadRoles::retrieval_heads() const {
  int64_t n = 0;
  for (const auto& layer : retrieval) n += static_cast<int64_t>(layer.size());
  return n;
}

bool HeadRoles::is_retrieval(int64_t layer, int64_t head) const {
  const auto& heads_of = retrieval.at(layer);
  return std::binary_search(heads_of.begin(), heads_of.end(), head);
}

HeadRoles head_roles_from_json(const nlohmann::json& json, const std::string& where) {
  if (!json.is_object() || json.value("format", std::string()) != kFormat)
    fail(where, ": not a head-policy file (\"format\" must be \"", kFormat,
         "\"); write one with `sinklm analyze --classify-heads FILE`");
  HeadRoles roles;
  roles.source = where;
  auto count = [&](const char* field) {
    if (!json.contains(field) || !json[field].is_number_integer() || json[field].get<int64_t>() < 1)
      fail(where, ": \"", field, "\" must be a positive integer");
    return json[field].get<int64_t>();
  };
  roles.layers = count("layers");
  roles.heads = count("heads");
  const auto& lists = json.contains("retrieval") ? json["retrieval"] : nlohmann::json();
  if (!lists.is_array() || static_cast<int64_t>(lists.size()) != roles.layers)
    fail(where, ": \"retrieval\" must be a list of ", roles.layers, " lists of head indices (one per layer)");
  for (size_t l = 0; l < lists.size(); ++l) {
    if (!lists[l].is_array()) fail(where, ": \"retrieval\"[", l, "] must be a list of head indices");
    std::set<int64_t> heads;
    for (const auto& h : lists[l]) {
      if (!h.is_number_integer() || h.get<int64_t>() < 0 || h.get<int64_t>() >= roles.heads)
        fail(where, ": \"retrieval\"[", l, "] has ", h.dump(), ", not a head index in [0, ", roles.heads, ")");
      if (!heads.insert(h.get<int64_t>()).second) fail(where, ": \"retrieval\"[", l, "] lists head ", h.dump(), " twice");
    }
    roles.retrieval.emplace_back(heads.begin(), heads.end());
  }
  return roles;
}

HeadRoles read_head_roles(const std::string& path, const std::string& option) {
  const std::string where = option + (option.back() == ':' ? "" : " ") + path;
  std::ifstream in(path);
  if (!in) fail(where, ": cannot open");
  nlohmann::json json;
  try {
    json = nlohmann::json::parse(in);
  } catch (const std::exception& e) {
    fail(where, ": not JSON (", e.what(), ")");
  }
  HeadRoles roles = head_roles_from_json(json, where);
  roles.source = path;
  return roles;
}

nlohmann::json head_roles_json(const HeadRoles& roles) {
  return {{"format", kFormat}, {"version", 1}, {"layers", roles.layers}, {"heads", roles.heads},
          {"retrieval", roles.retrieval}};
}

}  // namespace sinklm

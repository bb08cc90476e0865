// Which heads of a model keep a long cache: the head-policy file that `sinklm analyze --classify-heads`
// writes and `--cache heads --head-policy FILE` reads (decode/cache/kv_cache_policy.h: HeadAwareCache).
//
// File format (JSON, one object; only "format", "layers", "heads" and "retrieval" are read):
//   {"format": "sinklm-head-policy", "version": 1,
//    "layers": L, "heads": H,                    the model's shape; a file for another shape is refused
//    "retrieval": [[h, ...], ...],               per layer (L lists), the heads that keep the retrieval budget
//                                                R; every other head is a streaming head (S + (W - S))
//    "score": "...", "scores": [[...], ...],     what the classification measured per layer and head
//    "calibration": {...}}                       on what, with which window (for the reader)
// Hand-written files are welcome: a list of heads per layer is the whole contract.
#pragma once
#include <nlohmann/json.hpp>

#include <cstdint>
#include <string>
#include <vector>

namespace sinklm {

struct HeadRoles {
  int64_t layers = 0, heads = 0;
  std::vector<std::vector<int64_t>> retrieval;  // per layer, ascending, distinct head indices in [0, heads)
  std::string source;                           // where it was read from, for messages

  int64_t retrieval_heads() const;  // over all layers
  bool is_retrieval(int64_t layer, int64_t head) const;
  bool operator==(const HeadRoles& other) const {
    return layers == other.layers && heads == other.heads && retrieval == other.retrieval;
  }
};

// UserError naming `where` and the field.
HeadRoles head_roles_from_json(const nlohmann::json& json, const std::string& where);
// `option` names what gave the path in messages ("--head-policy", "--recall-policies heads:").
HeadRoles read_head_roles(const std::string& path, const std::string& option = "--head-policy");
// The fields head_roles_from_json reads ("format", "version", "layers", "heads", "retrieval").
nlohmann::json head_roles_json(const HeadRoles& roles);

}  // namespace sinklm

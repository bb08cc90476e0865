// The safetensors file format, read and written without Python:
//
//   [8 bytes]  N, little-endian uint64: length of the JSON header
//   [N bytes]  JSON: {"<tensor name>": {"dtype": "F32"|"F16"|"BF16"|..., "shape": [d0, d1, ...],
//                     "data_offsets": [begin, end]}, ..., "__metadata__": {"k": "v", ...}}
//              padded with spaces so the data starts 8-byte aligned
//   [rest]     raw little-endian tensor data; offsets are relative to the start of this region
//
// Reading memory-maps the file and validates every entry (dtype, shape vs. byte length, bounds, overlap);
// errors name the file and the tensor.
#pragma once
#include <torch/types.h>

#include <map>
#include <memory>
#include <string>
#include <utility>
#include <vector>

namespace sinklm {

struct SafetensorsEntry {
  std::string dtype;  // safetensors spelling: F32, F16, BF16, I64, ...
  std::vector<int64_t> shape;
  size_t begin = 0, end = 0;  // byte offsets in the data region
};

class SafetensorsFile {
 public:
  explicit SafetensorsFile(const std::string& path);  // mmaps and validates
  ~SafetensorsFile();
  SafetensorsFile(const SafetensorsFile&) = delete;
  SafetensorsFile& operator=(const SafetensorsFile&) = delete;

  const std::string& path() const { return path_; }
  const std::map<std::string, SafetensorsEntry>& entries() const { return entries_; }
  const std::map<std::string, std::string>& metadata() const { return metadata_; }
  bool contains(const std::string& name) const { return entries_.count(name) > 0; }
  // A CPU tensor viewing the mapped bytes, valid while this object lives; copy out of it, never write.
  torch::Tensor view(const std::string& name) const;

 private:
  std::string path_;
  const uint8_t* data_ = nullptr;  // start of the data region
  void* mapping_ = nullptr;
  size_t mapping_size_ = 0;
  std::map<std::string, SafetensorsEntry> entries_;
  std::map<std::string, std::string> metadata_;
};

// Writes tensors (any device; stored as their dtype) durably to `path`.
void write_safetensors(const std::string& path, const std::vector<std::pair<std::string, torch::Tensor>>& tensors,
                       const std::map<std::string, std::string>& metadata = {});

torch::ScalarType scalar_type_from_safetensors(const std::string& dtype, const std::string& where);
std::string safetensors_dtype_name(torch::ScalarType type);

}  // namespace sinklm

#include "model/io/safetensors.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <nlohmann/json.hpp>
#include <torch/torch.h>

#include <algorithm>
#include <cstring>

#include "core/files/atomic_dir.h"
#include "core/error.h"

static_assert(__BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__, "safetensors I/O assumes a little-endian host");

namespace sinklm {
namespace {

struct DtypeInfo {
  const char* name;
  torch::ScalarType type;
};
const DtypeInfo kDtypes[] = {
    {"F32", torch::kFloat32}, {"F16", torch::kFloat16}, {"BF16", torch::kBFloat16}, {"F64", torch::kFloat64},
    {"I64", torch::kInt64},   {"I32", torch::kInt32},   {"I16", torch::kInt16},     {"I8", torch::kInt8},
    {"U8", torch::kUInt8},    {"BOOL", torch::kBool},
};

constexpr uint64_t kMaxHeaderBytes = 100u << 20;

}  // namespace

torch::ScalarType scalar_type_from_safetensors(const std::string& dtype, const std::string& where) {
  for (const auto& d : kDtypes)
    if (dtype == d.name) return d.type;
  fail(where, ": unsupported dtype '", dtype, "' (supported: F32, F16, BF16, F64, I64, I32, I16, I8, U8, BOOL)");
}

std::string safetensors_dtype_name(torch::ScalarType type) {
  for (const auto& d : kDtypes)
    if (type == d.type) return d.name;
  SINKLM_ASSERT(false, "no safetensors dtype for ", c10::toString(type));
}

SafetensorsFile::SafetensorsFile(const std::string& path) : path_(path) {
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) fail(path, ": cannot open safetensors file: ", std::strerror(errno));
  struct stat st {};
  ::fstat(fd, &st);
  mapping_size_ = static_cast<size_t>(st.st_size);
  if (mapping_size_ < 8) {
    ::close(fd);
    fail(path, ": truncated safetensors file (", mapping_size_, " bytes; needs at least an 8-byte header length)");
  }
  mapping_ = ::mmap(nullptr, mapping_size_, PROT_READ, MAP_PRIVATE, fd, 0);
  ::close(fd);
  if (mapping_ == MAP_FAILED) {
    mapping_ = nullptr;
    fail(path, ": mmap failed: ", std::strerror(errno));
  }
  const auto* bytes = static_cast<const uint8_t*>(mapping_);
  uint64_t header_len;
  std::memcpy(&header_len, bytes, 8);
  if (header_len > kMaxHeaderBytes || header_len > mapping_size_ - 8)
    fail(path, ": corrupt safetensors header length ", header_len, " for a file of ", mapping_size_, " bytes");
  data_ = bytes + 8 + header_len;
  const size_t data_size = mapping_size_ - 8 - header_len;

  nlohmann::json header;
  try {
    header = nlohmann::json::parse(bytes + 8, bytes + 8 + header_len);
  } catch (const nlohmann::json::exception& e) {
    fail(path, ": safetensors header is not valid JSON: ", e.what());
  }
  if (!header.is_object()) fail(path, ": safetensors header must be a JSON object");
  std::vector<std::pair<size_t, size_t>> spans;
  for (auto& [name, info] : header.items()) {
    const std::string where = path + ": tensor '" + name + "'";
    if (name == "__metadata__") {
      if (!info.is_object()) fail(path, ": __metadata__ must be an object of strings");
      for (auto& [k, v] : info.items()) {
        if (!v.is_string()) fail(path, ": __metadata__ value for '", k, "' must be a string");
        metadata_[k] = v.get<std::string>();
      }
      continue;
    }
    if (!info.is_object() || !info.contains("dtype") || !info.contains("shape") || !info.contains("data_offsets"))
      fail(where, ": entry needs dtype, shape and data_offsets");
    SafetensorsEntry e;
    try {
      e.dtype = info["dtype"].get<std::string>();
      e.shape = info["shape"].get<std::vector<int64_t>>();
      auto offsets = info["data_offsets"].get<std::vector<uint64_t>>();
      if (offsets.size() != 2) fail(where, ": data_offsets must be [begin, end]");
      e.begin = offsets[0];
      e.end = offsets[1];
    } catch (const nlohmann::json::exception& ex) {
      fail(where, ": malformed entry: ", ex.what());
    }
    auto type = scalar_type_from_safetensors(e.dtype, where);
    size_t expected = c10::elementSize(type);
    for (int64_t d : e.shape) {
      if (d < 0) fail(where, ": negative dimension in shape");
      expected *= static_cast<size_t>(d);
    }
    if (e.end < e.begin || e.end - e.begin != expected)
      fail(where, ": data_offsets span ", e.end - e.begin, " bytes but dtype ", e.dtype, " and its shape need ", expected);
    if (e.end > data_size)
      fail(where, ": data ends at byte ", e.end, " past the end of the data (", data_size,
           " bytes): the file is truncated");
    spans.emplace_back(e.begin, e.end);
    entries_.emplace(name, std::move(e));
  }
  std::sort(spans.begin(), spans.end());
  for (size_t i = 1; i < spans.size(); ++i)
    if (spans[i].first < spans[i - 1].second) fail(path, ": tensors overlap in the data region (corrupt header)");
}

SafetensorsFile::~SafetensorsFile() {
  if (mapping_) ::munmap(mapping_, mapping_size_);
}

torch::Tensor SafetensorsFile::view(const std::string& name) const {
  auto it = entries_.find(name);
  SINKLM_ASSERT(it != entries_.end(), "tensor not in ", path_, ": ", name);
  const SafetensorsEntry& e = it->second;
  auto type = scalar_type_from_safetensors(e.dtype, path_ + ": tensor '" + name + "'");
  void* ptr = const_cast<uint8_t*>(data_ + e.begin);  // read-only mapping; callers only copy out of it
  return torch::from_blob(ptr, e.shape, torch::TensorOptions().dtype(type));
}

void write_safetensors(const std::string& path, const std::vector<std::pair<std::string, torch::Tensor>>& tensors,
                       const std::map<std::string, std::string>& metadata) {
  nlohmann::json header = nlohmann::json::object();
  if (!metadata.empty()) header["__metadata__"] = metadata;
  std::vector<torch::Tensor> cpu;
  size_t offset = 0;
  for (const auto& [name, tensor] : tensors) {
    SINKLM_ASSERT(!header.contains(name), "duplicate tensor name ", name);
    auto t = tensor.detach().to(torch::kCPU).contiguous();
    size_t nbytes = t.numel() * t.element_size();
    header[name] = {{"dtype", safetensors_dtype_name(t.scalar_type())},
                    {"shape", t.sizes().vec()},
                    {"data_offsets", {offset, offset + nbytes}}};
    offset += nbytes;
    cpu.push_back(t);
  }
  std::string json = header.dump();
  json.append((8 - json.size() % 8) % 8, ' ');
  std::string blob(8 + json.size() + offset, '\0');
  uint64_t header_len = json.size();
  std::memcpy(blob.data(), &header_len, 8);
  std::memcpy(blob.data() + 8, json.data(), json.size());
  char* data = blob.data() + 8 + json.size();
  for (const auto& t : cpu) {
    std::memcpy(data, t.data_ptr(), t.numel() * t.element_size());
    data += t.numel() * t.element_size();
  }
  write_file_durable(path, blob);
}

}  // namespace sinklm

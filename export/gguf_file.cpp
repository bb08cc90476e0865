#include "export/gguf_file.h"

#include <c10/util/Half.h>
#include <torch/torch.h>

#include <cmath>
#include <cstring>

#include "core/error.h"
#include "core/files/atomic_dir.h"

namespace sinklm {
namespace {

constexpr uint32_t kVersion = 3;
constexpr uint64_t kAlignment = 32;  // general.alignment's default
enum ValueType : uint32_t { kU32 = 4, kI32 = 5, kF32 = 6, kBool = 7, kString = 8, kArray = 9 };

template <typename T>
void put(std::string& out, T value) {
  out.append(reinterpret_cast<const char*>(&value), sizeof(T));
}

void put_string(std::string& out, const std::string& s) {
  put<uint64_t>(out, s.size());
  out += s;
}

void pad_to_alignment(std::string& out) { out.append((kAlignment - out.size() % kAlignment) % kAlignment, '\0'); }

std::string tensor_bytes(const torch::Tensor& tensor, GgufTensorType type) {
  const torch::Tensor t = tensor.detach().to(torch::kCPU).contiguous();
  if (type == GgufTensorType::F32 || type == GgufTensorType::BF16) {
    const torch::Tensor c = t.to(type == GgufTensorType::F32 ? torch::kFloat32 : torch::kBFloat16).contiguous();
    return std::string(static_cast<const char*>(c.data_ptr()), c.nbytes());
  }
  const torch::Tensor f = t.to(torch::kFloat32).contiguous();
  const int64_t cols = f.size(-1), rows = f.numel() / cols;
  std::string out;
  for (int64_t r = 0; r < rows; ++r) out += quantize_q8_0(f.data_ptr<float>() + r * cols, cols);
  return out;
}

}  // namespace

std::string quantize_q8_0(const float* row, int64_t length) {
  SINKLM_ASSERT(length % 32 == 0, "Q8_0 row of ", length, " values is not whole blocks of 32");
  std::string out;
  out.reserve(length / 32 * 34);
  for (int64_t b = 0; b < length; b += 32) {
    float amax = 0;
    for (int i = 0; i < 32; ++i) amax = std::max(amax, std::fabs(row[b + i]));
    const float d = amax / 127.0f;
    const float inverse = d != 0 ? 1.0f / d : 0.0f;
    put<uint16_t>(out, c10::Half(d).x);  // f16, rounded to nearest even
    for (int i = 0; i < 32; ++i) put<int8_t>(out, static_cast<int8_t>(std::round(row[b + i] * inverse)));
  }
  return out;
}

void GgufFile::begin_value(const std::string& key, uint32_t type) {
  put_string(metadata_, key);
  put<uint32_t>(metadata_, type);
  ++metadata_count_;
}

void GgufFile::begin_array(const std::string& key, uint32_t element_type, size_t count) {
  begin_value(key, kArray);
  put<uint32_t>(metadata_, element_type);
  put<uint64_t>(metadata_, count);
}

void GgufFile::add_string(const std::string& key, const std::string& value) {
  begin_value(key, kString);
  put_string(metadata_, value);
}

void GgufFile::add_u32(const std::string& key, uint32_t value) {
  begin_value(key, kU32);
  put<uint32_t>(metadata_, value);
}

void GgufFile::add_f32(const std::string& key, float value) {
  begin_value(key, kF32);
  put<float>(metadata_, value);
}

void GgufFile::add_bool(const std::string& key, bool value) {
  begin_value(key, kBool);
  put<uint8_t>(metadata_, value ? 1 : 0);
}

void GgufFile::add_strings(const std::string& key, const std::vector<std::string>& values) {
  begin_array(key, kString, values.size());
  for (const auto& v : values) put_string(metadata_, v);
}

void GgufFile::add_i32s(const std::string& key, const std::vector<int32_t>& values) {
  begin_array(key, kI32, values.size());
  for (int32_t v : values) put<int32_t>(metadata_, v);
}

void GgufFile::add_f32s(const std::string& key, const std::vector<float>& values) {
  begin_array(key, kF32, values.size());
  for (float v : values) put<float>(metadata_, v);
}

void GgufFile::add_tensor(const std::string& name, const torch::Tensor& tensor, GgufTensorType type) {
  SINKLM_ASSERT(tensor.dim() == 1 || tensor.dim() == 2, "GGUF tensor ", name, " has ", tensor.dim(), " dimensions");
  tensors_.push_back(Tensor{name, tensor.sizes().vec(), type, tensor_bytes(tensor, type)});
}

void GgufFile::write(const std::string& path) const {
  std::string out = "GGUF";
  put<uint32_t>(out, kVersion);
  put<uint64_t>(out, tensors_.size());
  put<uint64_t>(out, metadata_count_);
  out += metadata_;
  uint64_t offset = 0;
  for (const Tensor& t : tensors_) {
    put_string(out, t.name);
    put<uint32_t>(out, static_cast<uint32_t>(t.shape.size()));
    for (auto it = t.shape.rbegin(); it != t.shape.rend(); ++it) put<uint64_t>(out, static_cast<uint64_t>(*it));
    put<uint32_t>(out, static_cast<uint32_t>(t.type));
    put<uint64_t>(out, offset);
    offset += (t.bytes.size() + kAlignment - 1) / kAlignment * kAlignment;
  }
  pad_to_alignment(out);
  for (const Tensor& t : tensors_) {
    out += t.bytes;
    pad_to_alignment(out);
  }
  write_file_atomic(path, out);
}

}  // namespace sinklm

// GGUF version 3, the file llama.cpp (and ggml) loads, written by sinklm. Little-endian throughout:
//   header     "GGUF" (4 bytes), version u32 = 3, tensor count u64, metadata count u64
//   metadata   per key: key (string), value type u32, value
//              string = length u64 + UTF-8 bytes (no terminator); types: u8 0, i8 1, u16 2, i16 3, u32 4,
//              i32 5, f32 6, bool 7 (one byte), string 8, array 9 (element type u32, count u64, elements),
//              u64 10, i64 11, f64 12
//   tensors    per tensor: name (string), dimension count u32, dimensions u64 each, innermost first (a
//              [rows, cols] matrix is written cols, rows), ggml type u32, data offset u64 (from the data
//              section's start, a multiple of the alignment)
//   padding    zeros to general.alignment (32)
//   data       each tensor's bytes at its offset, zero-padded to the alignment:
//              F32 (type 0) and BF16 (type 30) row-major; Q8_0 (type 8) per row, per block of 32 values:
//              the scale d = max|x| / 127 as f16, then 32 i8 q = round(x / d), half away from zero (ggml's
//              quantize_row_q8_0_ref: x * (1/d) in f32, so the bytes equal llama.cpp's own quantiser's)
#pragma once
#include <torch/types.h>

#include <cstdint>
#include <string>
#include <vector>

namespace sinklm {

enum class GgufTensorType : uint32_t { F32 = 0, Q8_0 = 8, BF16 = 30 };

class GgufFile {
 public:
  void add_string(const std::string& key, const std::string& value);
  void add_u32(const std::string& key, uint32_t value);
  void add_f32(const std::string& key, float value);
  void add_bool(const std::string& key, bool value);
  void add_strings(const std::string& key, const std::vector<std::string>& values);
  void add_i32s(const std::string& key, const std::vector<int32_t>& values);
  void add_f32s(const std::string& key, const std::vector<float>& values);
  // `tensor` [n] or [rows, cols], any float dtype; Q8_0 needs cols % 32 == 0 (asserted: callers choose).
  void add_tensor(const std::string& name, const torch::Tensor& tensor, GgufTensorType type);
  // Writes the file atomically (a temporary beside it, fsync'ed, renamed).
  void write(const std::string& path) const;

 private:
  struct Tensor {
    std::string name;
    std::vector<int64_t> shape;  // as torch has it, outermost first
    GgufTensorType type;
    std::string bytes;
  };
  void begin_value(const std::string& key, uint32_t type);  // the key and the value's type
  void begin_array(const std::string& key, uint32_t element_type, size_t count);
  std::string metadata_;  // the encoded key/value pairs
  uint64_t metadata_count_ = 0;
  std::vector<Tensor> tensors_;
};

// Q8_0 blocks of `row` (float32, length a multiple of 32), as described above.
std::string quantize_q8_0(const float* row, int64_t length);

}  // namespace sinklm

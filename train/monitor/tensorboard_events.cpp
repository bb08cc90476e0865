#include "train/monitor/tensorboard_events.h"

#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstring>
#include <filesystem>

#include "core/error.h"
#include "core/files/crc32c.h"

namespace sinklm {
namespace {

// Protocol-buffer wire format, the few pieces an Event needs (tensorflow/core/util/event.proto):
//   Event      { double wall_time = 1; int64 step = 2; string file_version = 3; Summary summary = 5;
//                SessionLog session_log = 6; }
//   Summary    { repeated Value value = 1; }   Value { string tag = 1; float simple_value = 2; }
//   SessionLog { SessionStatus status = 1; }   START = 1
void put_varint(std::string& out, uint64_t v) {
  for (; v >= 0x80; v >>= 7) out += static_cast<char>((v & 0x7F) | 0x80);
  out += static_cast<char>(v);
}
template <typename T>
void put_fixed(std::string& out, T v) {  // little-endian, as x86-64 stores it
  char bytes[sizeof(T)];
  std::memcpy(bytes, &v, sizeof(T));
  out.append(bytes, sizeof(T));
}
void put_tag(std::string& out, int field, int wire_type) { put_varint(out, static_cast<uint64_t>(field << 3 | wire_type)); }
void put_bytes(std::string& out, int field, const std::string& bytes) {
  put_tag(out, field, 2);
  put_varint(out, bytes.size());
  out += bytes;
}

std::string event_header(int64_t step) {
  const double now = std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
  std::string event;
  put_tag(event, 1, 1);
  put_fixed(event, now);
  put_tag(event, 2, 0);
  put_varint(event, static_cast<uint64_t>(step));
  return event;
}

std::string scalar_value(const std::string& tag, float value) {
  std::string out;
  put_bytes(out, 1, tag);
  put_tag(out, 2, 5);
  put_fixed(out, value);
  return out;
}

// TFRecord's checksum: CRC-32C rotated right by 15 bits plus a constant.
uint32_t masked_crc(const void* data, size_t size) {
  const uint32_t crc = crc32c(data, size);
  return ((crc >> 15) | (crc << 17)) + 0xa282ead8u;
}

std::string host_name() {
  char name[256] = {};
  return ::gethostname(name, sizeof name - 1) == 0 ? name : "localhost";
}

}  // namespace

TensorBoardEvents::TensorBoardEvents(const std::string& dir, int64_t first_step) {
  std::filesystem::create_directories(dir);
  const auto seconds = std::chrono::duration_cast<std::chrono::seconds>(std::chrono::system_clock::now().time_since_epoch());
  path_ = dir + "/events.out.tfevents." + std::to_string(seconds.count()) + "." + host_name() + "." +
          std::to_string(::getpid());
  out_.open(path_, std::ios::binary | std::ios::trunc);
  if (!out_) fail(path_, ": cannot create the TensorBoard event file; check that the run directory is writable");
  std::string version = event_header(0);
  put_bytes(version, 3, "brain.Event:2");
  write_event(version);
  std::string start = event_header(first_step + 1), session_log;
  put_tag(session_log, 1, 0);
  put_varint(session_log, 1);  // START
  put_bytes(start, 6, session_log);
  write_event(start);
}

void TensorBoardEvents::add_scalars(const nlohmann::json& record) {
  std::string summary;
  for (const auto& [key, value] : record.items()) {
    if (key == "step") continue;
    if (value.is_number()) put_bytes(summary, 1, scalar_value(key, value.get<float>()));
    if (value.is_array())
      for (size_t i = 0; i < value.size(); ++i)
        if (value[i].is_number())
          put_bytes(summary, 1, scalar_value(key + "/layer_" + std::to_string(i), value[i].get<float>()));
    if (value.is_object())
      for (const auto& [name, item] : value.items())
        if (item.is_number()) put_bytes(summary, 1, scalar_value(key + "/" + name, item.get<float>()));
  }
  if (summary.empty()) return;
  std::string event = event_header(record.at("step").get<int64_t>());
  put_bytes(event, 5, summary);
  write_event(event);
}

// A record: u64 length, u32 masked CRC of those 8 bytes, the event, u32 masked CRC of the event.
void TensorBoardEvents::write_event(const std::string& event) {
  std::string record;
  put_fixed<uint64_t>(record, event.size());
  put_fixed<uint32_t>(record, masked_crc(record.data(), 8));
  record += event;
  put_fixed<uint32_t>(record, masked_crc(event.data(), event.size()));
  out_.write(record.data(), static_cast<std::streamsize>(record.size()));
  out_.flush();
  if (!out_) fail_storage(errno, path_, ": cannot write the TensorBoard event file (disk full?)");
}

}  // namespace sinklm

#include "formats/safetensors_header.hpp"

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <tuple>

#include <nlohmann/json.hpp>

#include "common/error.hpp"
#include "common/printable.hpp"

static_assert(__BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__, "the header length is read as a native uint64");

namespace gt {
namespace {

// Every problem: one line. Tensor names and dtypes come from the JSON and may hold any character
// ("a\nb"), so control characters are shown escaped (found by tests/fuzz/safetensors_header_fuzz.cpp).
[[noreturn]] void bad_file(const std::string& path, const std::string& problem) { fail(path, printable(problem)); }

// The Python package's header length limit; a larger "header" is a corrupt or hostile file.
constexpr uint64_t kMaxHeaderBytes = 100'000'000;

std::string range(uint64_t b, uint64_t e) {
  return "[" + std::to_string(b) + ", " + std::to_string(e) + ")";
}

// A bad value as messages quote it: shallow and short. Dumping arbitrary JSON recurses once per
// nesting level (a 2 MB header whose shape was a million nested lists overflowed the stack;
// tests/fuzz/corpus/safetensors_header/crash-deep-shape.safetensors) and can be megabytes long.
std::string brief(const nlohmann::json& j) {
  if (j.is_structured())
    for (const auto& v : j)
      if (v.is_structured()) return j.is_array() ? "(a list of lists)" : "(an object of objects)";
  std::string s = j.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
  constexpr size_t kMax = 80;
  if (s.size() > kMax) s = s.substr(0, kMax - 3) + "...";
  return s;
}

std::string shape_str(const std::vector<int64_t>& shape) {
  std::string s = "[";
  for (size_t i = 0; i < shape.size(); ++i) s += (i ? ", " : "") + std::to_string(shape[i]);
  return s + "]";
}

// One header entry, checked on its own; offsets against the data section size.
SafetensorsEntry parse_entry(const std::string& path, const std::string& name,
                             const nlohmann::json& j, uint64_t data_bytes) {
  const std::string where = "tensor '" + name + "'";
  auto bad = [&](const std::string& problem) { bad_file(path, where + ": " + problem); };
  if (!j.is_object()) bad("header entry is not a JSON object");
  for (const char* key : {"dtype", "shape", "data_offsets"})
    if (!j.contains(key)) bad(std::string("header entry has no '") + key + "'");

  SafetensorsEntry e;
  if (!j["dtype"].is_string()) bad("dtype is not a string");
  e.dtype = j["dtype"].get<std::string>();
  const SafetensorsDtype* d = find_safetensors_dtype(e.dtype);
  if (!d) bad("dtype '" + e.dtype + "' is not supported");

  if (!j["shape"].is_array()) bad("shape is not an array");
  uint64_t numel = 1;
  bool overflow = false;
  for (const auto& dim : j["shape"]) {
    if (!dim.is_number_unsigned()) bad("shape " + brief(j["shape"]) + " has an entry that is not a non-negative integer");
    uint64_t v = dim.get<uint64_t>();
    if (v > uint64_t(INT64_MAX)) bad("shape " + brief(j["shape"]) + " is too large");
    e.shape.push_back(int64_t(v));
    overflow |= __builtin_mul_overflow(numel, v, &numel);
  }
  uint64_t need = 0;
  overflow |= __builtin_mul_overflow(numel, d->size, &need);

  const auto& off = j["data_offsets"];
  if (!off.is_array() || off.size() != 2 || !off[0].is_number_unsigned() || !off[1].is_number_unsigned())
    bad("data_offsets " + brief(off) + " is not a pair of non-negative integers");
  e.begin = off[0].get<uint64_t>();
  e.end = off[1].get<uint64_t>();
  if (e.end < e.begin) bad("data_offsets " + range(e.begin, e.end) + " end before they begin");
  if (e.end > data_bytes)
    bad("data_offsets " + range(e.begin, e.end) + " go beyond the data section (" +
        std::to_string(data_bytes) + " bytes)");
  if (overflow || e.end - e.begin != need)
    bad("data_offsets " + range(e.begin, e.end) + " hold " + std::to_string(e.end - e.begin) +
        " bytes but shape " + shape_str(e.shape) + " of " + e.dtype + " needs " +
        (overflow ? std::string("more than 2^64") : std::to_string(need)));
  return e;
}

}  // namespace

const std::vector<SafetensorsDtype>& safetensors_dtypes() {
  static const std::vector<SafetensorsDtype> kDtypes = {
      {"U64", 8, false},     {"I64", 8, false},    {"F64", 8, true},  {"C64", 8, false}, {"F32", 4, true},
      {"U32", 4, false},     {"I32", 4, false},    {"BF16", 2, true}, {"F16", 2, true},  {"U16", 2, false},
      {"I16", 2, false},     {"F8_E4M3", 1, true}, {"F8_E5M2", 1, true}, {"I8", 1, false}, {"U8", 1, false},
      {"BOOL", 1, false},
  };
  return kDtypes;
}

const SafetensorsDtype* find_safetensors_dtype(const std::string& name) {
  for (const auto& d : safetensors_dtypes())
    if (name == d.name) return &d;
  return nullptr;
}

SafetensorsHeader parse_safetensors_header(const char* bytes, uint64_t file_bytes, const std::string& path) {
  if (file_bytes < 8)
    bad_file(path, "file is " + std::to_string(file_bytes) + " bytes, too short for the 8-byte header length");
  uint64_t header_bytes = 0;
  std::memcpy(&header_bytes, bytes, 8);  // little-endian, as the machines graphtune runs on
  if (header_bytes > file_bytes - 8)
    bad_file(path, "header length " + std::to_string(header_bytes) + " exceeds the file size (" +
                   std::to_string(file_bytes) + " bytes): truncated or not a safetensors file");
  if (header_bytes > kMaxHeaderBytes)
    bad_file(path, "header length " + std::to_string(header_bytes) + " is over the 100 MB limit");

  nlohmann::json header;
  try {
    header = nlohmann::json::parse(bytes + 8, bytes + 8 + header_bytes);
  } catch (const nlohmann::json::exception& e) {
    bad_file(path, std::string("header is not valid JSON: ") + e.what());
  }
  if (!header.is_object()) bad_file(path, "header is not a JSON object");

  SafetensorsHeader h;
  h.data_start = 8 + header_bytes;
  const uint64_t data_bytes = file_bytes - h.data_start;
  for (const auto& [name, value] : header.items()) {
    if (name == "__metadata__") {
      if (!value.is_object()) bad_file(path, "__metadata__ is not a JSON object");
      for (const auto& [k, v] : value.items()) {
        if (!v.is_string()) bad_file(path, "__metadata__ value for '" + k + "' is not a string");
        h.metadata[k] = v.get<std::string>();
      }
      continue;
    }
    h.entries[name] = parse_entry(path, name, value, data_bytes);
  }

  // No two tensors may share bytes (empty tensors hold none). Sorted by start, ranges that
  // do not overlap their successor cannot overlap anything later either.
  std::vector<const std::pair<const std::string, SafetensorsEntry>*> order;
  for (const auto& kv : h.entries)
    if (kv.second.end > kv.second.begin) order.push_back(&kv);
  std::sort(order.begin(), order.end(), [](auto* a, auto* b) {
    return std::tie(a->second.begin, a->second.end) < std::tie(b->second.begin, b->second.end);
  });
  for (size_t i = 1; i < order.size(); ++i) {
    const auto* prev = order[i - 1];
    const auto* cur = order[i];
    if (cur->second.begin < prev->second.end)
      bad_file(path, "tensor '" + cur->first + "': data_offsets " + range(cur->second.begin, cur->second.end) +
                     " overlap tensor '" + prev->first + "' " + range(prev->second.begin, prev->second.end));
  }
  return h;
}

}  // namespace gt

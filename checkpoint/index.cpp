#include "checkpoint/index.hpp"

#include <algorithm>
#include <cstdio>
#include <optional>

#include <nlohmann/json.hpp>

#include "common/error.hpp"

namespace gt::ckpt {
namespace {

using nlohmann::json;

constexpr const char* kFormat = "graphtune-checkpoint";

struct DtypeSize {
  const char* name;
  int64_t bytes;
};
const DtypeSize kDtypeSizes[] = {{"F64", 8}, {"F32", 4}, {"F16", 2}, {"BF16", 2}, {"I64", 8},
                                 {"I32", 4}, {"I16", 2}, {"I8", 1},  {"U8", 1},   {"BOOL", 1}};

std::string crc_hex(uint32_t crc) {
  char buf[9];
  std::snprintf(buf, sizeof buf, "%08x", crc);
  return buf;
}

// Reads one index.json, naming the JSON path of whatever is wrong: every check fails through
// bad(field, problem), so each message is "PATH: FIELD: PROBLEM" on one line.
class Parser {
 public:
  explicit Parser(std::string path) : path_(std::move(path)) {}

  [[noreturn]] void bad(const std::string& field, const std::string& problem) const {
    fail(path_, field + ": " + problem);
  }

  static std::string member(const std::string& field, const std::string& key) {
    return field.empty() ? key : field + "." + key;
  }
  // Map keys are free text (tensor names hold dots and slashes): quoted in paths, JSON-escaped
  // so that a control character in a damaged key cannot break the one-line message.
  static std::string quoted(const std::string& field, const std::string& key) {
    return field + "." + json(key).dump(-1, ' ', false, json::error_handler_t::replace);
  }

  const json& get(const json& obj, const std::string& field, const std::string& key) const {
    auto it = obj.find(key);
    if (it == obj.end()) bad(member(field, key), "missing");
    return *it;
  }
  void object(const json& j, const std::string& field) const {
    if (!j.is_object()) bad(field, "is not an object (" + short_dump(j) + ")");
  }
  std::string string(const json& j, const std::string& field) const {
    if (!j.is_string()) bad(field, "is not a string (" + short_dump(j) + ")");
    return j.get<std::string>();
  }
  int64_t integer(const json& j, const std::string& field, int64_t min) const {
    if (!j.is_number_integer() || (j.is_number_unsigned() && j.get<uint64_t>() > uint64_t(INT64_MAX)))
      bad(field, "is not an integer (" + short_dump(j) + ")");
    const int64_t v = j.get<int64_t>();
    if (v < min) bad(field, "is " + std::to_string(v) + ", below " + std::to_string(min));
    return v;
  }
  uint64_t unsigned_integer(const json& j, const std::string& field) const {
    if (!j.is_number_unsigned()) bad(field, "is not a non-negative integer (" + short_dump(j) + ")");
    return j.get<uint64_t>();
  }
  std::vector<int64_t> integers(const json& j, const std::string& field) const {
    if (!j.is_array()) bad(field, "is not an array (" + short_dump(j) + ")");
    std::vector<int64_t> out;
    for (size_t i = 0; i < j.size(); ++i) out.push_back(integer(j[i], field + "[" + std::to_string(i) + "]", 0));
    return out;
  }

  Layout layout(const json& j, const std::string& field) const {
    object(j, field);
    Layout l;
    l.dp = int(integer(get(j, field, "dp"), member(field, "dp"), 1));
    l.pp = int(integer(get(j, field, "pp"), member(field, "pp"), 1));
    l.tp = int(integer(get(j, field, "tp"), member(field, "tp"), 1));
    const std::string pf = member(field, "partition");
    for (int64_t first : integers(get(j, field, "partition"), pf)) l.partition.push_back(int(first));
    // Empty: a stage without decoder layers. Otherwise the rule of layout/partition.hpp.
    if (!l.partition.empty()) {
      if (int(l.partition.size()) != l.pp)
        bad(pf, "has " + std::to_string(l.partition.size()) + " entries for pp=" + std::to_string(l.pp));
      if (l.partition[0] != 0) bad(pf, "does not start at 0");
      for (size_t s = 1; s < l.partition.size(); ++s)
        if (l.partition[s] <= l.partition[s - 1]) bad(pf, "is not strictly increasing");
    }
    return l;
  }

  FileEntry file(const json& j, const std::string& field) const {
    object(j, field);
    FileEntry f;
    f.rank = int(integer(get(j, field, "rank"), member(field, "rank"), 0));
    f.bytes = unsigned_integer(get(j, field, "bytes"), member(field, "bytes"));
    const std::string cf = member(field, "crc32");
    const std::string hex = string(get(j, field, "crc32"), cf);
    if (hex.size() != 8 || hex.find_first_not_of("0123456789abcdef") != std::string::npos)
      bad(cf, "\"" + hex + "\" is not 8 lowercase hex digits");
    f.crc32 = uint32_t(std::stoul(hex, nullptr, 16));
    return f;
  }

  Chunk chunk(const json& j, const std::string& field, const TensorEntry& t, int64_t elem_bytes,
              const std::map<std::string, FileEntry>& files) const {
    object(j, field);
    Chunk c;
    c.file = string(get(j, field, "file"), member(field, "file"));
    auto file = files.find(c.file);
    if (file == files.end()) bad(member(field, "file"), "\"" + c.file + "\" is not listed in files");
    c.begin = unsigned_integer(get(j, field, "begin"), member(field, "begin"));
    c.end = unsigned_integer(get(j, field, "end"), member(field, "end"));
    c.offset = integers(get(j, field, "offset"), member(field, "offset"));
    c.shape = integers(get(j, field, "shape"), member(field, "shape"));
    for (const char* key : {"offset", "shape"}) {
      const auto& v = std::string(key) == "offset" ? c.offset : c.shape;
      if (v.size() != t.shape.size())
        bad(member(field, key), shape_text(v) + " has " + std::to_string(v.size()) + " dimensions, the tensor " +
                                    std::to_string(t.shape.size()));
    }
    for (size_t d = 0; d < t.shape.size(); ++d)
      if (c.offset[d] > t.shape[d] || c.shape[d] > t.shape[d] - c.offset[d])
        bad(member(field, "offset"), "box at " + shape_text(c.offset) + " of shape " + shape_text(c.shape) +
                                         " goes outside the tensor's shape " + shape_text(t.shape));
    const std::string range = "[" + std::to_string(c.begin) + ", " + std::to_string(c.end) + ")";
    const uint64_t need = uint64_t(volume(c.shape, field)) * uint64_t(elem_bytes);  // < 2^63
    if (c.end < c.begin || c.end - c.begin != need)
      bad(member(field, "end"), "byte range " + range + " does not hold the " + std::to_string(need) +
                                    " bytes of shape " + shape_text(c.shape) + " of " + t.dtype);
    if (c.end > file->second.bytes)
      bad(member(field, "end"), "byte range " + range + " goes beyond the " + std::to_string(file->second.bytes) +
                                    " bytes of \"" + c.file + "\"");
    return c;
  }

  TensorEntry tensor(const json& j, const std::string& field, const std::map<std::string, FileEntry>& files) const {
    object(j, field);
    TensorEntry t;
    t.dtype = string(get(j, field, "dtype"), member(field, "dtype"));
    const int64_t elem_bytes = dtype_size(t.dtype, path_ + ": " + member(field, "dtype"));
    t.shape = integers(get(j, field, "shape"), member(field, "shape"));
    const int64_t total = volume(t.shape, member(field, "shape"));
    const std::string cf = member(field, "chunks");
    const json& chunks = get(j, field, "chunks");
    if (!chunks.is_array()) bad(cf, "is not an array (" + short_dump(chunks) + ")");
    int64_t covered = 0;
    for (size_t i = 0; i < chunks.size(); ++i) {
      const std::string f = cf + "[" + std::to_string(i) + "]";
      t.chunks.push_back(chunk(chunks[i], f, t, elem_bytes, files));
      for (size_t k = 0; k < i; ++k)
        if (overlap(t.chunks[k], t.chunks[i]))
          bad(f, "box at " + shape_text(t.chunks[i].offset) + " of shape " + shape_text(t.chunks[i].shape) +
                     " overlaps chunks[" + std::to_string(k) + "]");
      covered += volume(t.chunks.back().shape, f);  // disjoint boxes in the tensor: no overflow
    }
    // Disjoint boxes inside the tensor whose volumes add up to the tensor's cover it exactly.
    if (covered != total)
      bad(cf, "cover " + std::to_string(covered) + " of the tensor's " + std::to_string(total) +
                  " elements (a gap)");
    return t;
  }

 private:
  static std::string short_dump(const json& j) {
    std::string s = j.dump();
    return s.size() > 40 ? s.substr(0, 37) + "..." : s;
  }
  int64_t volume(const std::vector<int64_t>& shape, const std::string& field) const {
    int64_t v = 1;
    for (int64_t d : shape)
      if (__builtin_mul_overflow(v, d, &v) || v > (int64_t(1) << 60)) bad(field, shape_text(shape) + " is too large");
    return v;
  }
  static bool overlap(const Chunk& a, const Chunk& b) {
    for (size_t d = 0; d < a.shape.size(); ++d)
      if (std::max(a.offset[d], b.offset[d]) >= std::min(a.offset[d] + a.shape[d], b.offset[d] + b.shape[d]))
        return false;
    return true;  // a 0-d tensor's chunks all hold its one element
  }

  std::string path_;
};

}  // namespace

int64_t dtype_size(const std::string& dtype, const std::string& where) {
  for (const auto& d : kDtypeSizes)
    if (dtype == d.name) return d.bytes;
  fail(where, "unknown dtype \"" + dtype + "\" (known: F64 F32 F16 BF16 I64 I32 I16 I8 U8 BOOL)");
}

std::string Layout::str() const {
  std::string s = "dp=" + std::to_string(dp) + " pp=" + std::to_string(pp) + " tp=" + std::to_string(tp) +
                  " partition=[";
  for (size_t i = 0; i < partition.size(); ++i) s += (i ? ", " : "") + std::to_string(partition[i]);
  return s + "]";
}

std::string index_to_json(const Index& index) {
  // nlohmann::json keeps object keys in a std::map: sorted, so the bytes depend on the content only.
  json j;
  j["format"] = kFormat;
  j["version"] = Index::kVersion;
  j["step"] = index.step;
  j["total_steps"] = index.total_steps;
  j["stage"] = name_of(index.stage);
  j["layout"] = {{"dp", index.layout.dp},
                 {"pp", index.layout.pp},
                 {"tp", index.layout.tp},
                 {"partition", index.layout.partition}};
  j["model_fingerprint"] = index.model_fingerprint;
  j["config"] = index.config;
  j["files"] = json::object();
  for (const auto& [name, f] : index.files)
    j["files"][name] = {{"rank", f.rank}, {"bytes", f.bytes}, {"crc32", crc_hex(f.crc32)}};
  j["tensors"] = json::object();
  for (const auto& [key, t] : index.tensors) {
    json chunks = json::array();
    for (const auto& c : t.chunks)
      chunks.push_back({{"file", c.file}, {"begin", c.begin}, {"end", c.end}, {"offset", c.offset}, {"shape", c.shape}});
    j["tensors"][key] = {{"dtype", t.dtype}, {"shape", t.shape}, {"chunks", std::move(chunks)}};
  }
  return j.dump();
}

Index parse_index(const std::string& json_text, const std::string& path) {
  json j;
  try {
    j = json::parse(json_text);
  } catch (const json::exception& e) {
    fail(path, std::string("not valid JSON: ") + e.what());
  }
  Parser p(path);
  if (!j.is_object()) p.bad("(top level)", "is not an object");
  const std::string format = p.string(p.get(j, "", "format"), "format");
  if (format != kFormat) p.bad("format", "is \"" + format + "\", not \"" + kFormat + "\"");
  const int64_t version = p.integer(p.get(j, "", "version"), "version", 0);
  if (version != Index::kVersion)
    p.bad("version", "is " + std::to_string(version) + ", this graphtune reads version " +
                         std::to_string(Index::kVersion));

  Index index;
  index.step = p.integer(p.get(j, "", "step"), "step", 0);
  index.total_steps = p.integer(p.get(j, "", "total_steps"), "total_steps", 0);
  if (index.total_steps > 0 && index.step > index.total_steps)  // 0: a length the saver did not know
    p.bad("step", "is " + std::to_string(index.step) + ", past the run's total_steps " + std::to_string(index.total_steps));
  const std::string stage = p.string(p.get(j, "", "stage"), "stage");
  const std::optional<Phase> phase = value_named<Phase>(stage);
  if (!phase) p.bad("stage", "is \"" + stage + "\", not a stage graphtune trains (lm, grounding, graph_matching, task)");
  index.stage = *phase;
  index.layout = p.layout(p.get(j, "", "layout"), "layout");
  index.model_fingerprint = p.string(p.get(j, "", "model_fingerprint"), "model_fingerprint");

  const json& config = p.get(j, "", "config");
  p.object(config, "config");
  for (const auto& [k, v] : config.items()) index.config[k] = p.string(v, Parser::quoted("config", k));

  const json& files = p.get(j, "", "files");
  p.object(files, "files");
  const int64_t world = int64_t{index.layout.dp} * index.layout.pp * index.layout.tp;
  for (const auto& [name, v] : files.items()) {
    // Names inside the checkpoint folder only: a damaged or hostile index must not point the
    // reader (or keep_latest's deletion) at another folder.
    if (name.empty() || name == "." || name == ".." || name.find('/') != std::string::npos ||
        name.find('\0') != std::string::npos)
      p.bad(Parser::quoted("files", name), "is not a file name inside the checkpoint folder");
    index.files[name] = p.file(v, Parser::quoted("files", name));
    if (index.files[name].rank >= world)
      p.bad(Parser::quoted("files", name) + ".rank", "is " + std::to_string(index.files[name].rank) +
                                                         ", but the layout has " + std::to_string(world) + " ranks");
  }

  const json& tensors = p.get(j, "", "tensors");
  p.object(tensors, "tensors");
  for (const auto& [key, v] : tensors.items())
    index.tensors[key] = p.tensor(v, Parser::quoted("tensors", key), index.files);
  return index;
}

}  // namespace gt::ckpt

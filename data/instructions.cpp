// GraphGPT instruction records: reading (whole file through nlohmann::json), validation and
// writing in the reference's layout.
#include "data/instructions.hpp"

#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "common/atomic_file.hpp"
#include "common/error.hpp"

namespace gt {

namespace {

using json = nlohmann::json;

// Names the record in messages: "record 3 (id \"arxiv_train_7\")", or "record 3" before the id
// is known. Strings in messages are JSON-quoted, so a newline in an id keeps the message one line.
std::string quoted(const std::string& s) {
  return json(s).dump(-1, ' ', false, json::error_handler_t::replace);
}

constexpr size_t kNoIndex = static_cast<size_t>(-1);

struct RecordContext {
  const std::string& where;
  size_t index;
  std::string id;
  bool id_known = false;

  [[noreturn]] void fail_field(const std::string& field, const std::string& problem) const {
    std::string rec = index == kNoIndex ? "record" : "record " + std::to_string(index);
    if (id_known) rec += index == kNoIndex ? " id " + quoted(id) : " (id " + quoted(id) + ")";
    fail(where, rec + ": " + field + ": " + problem);
  }
};

std::string type_name(const json& j) {
  if (j.is_number_integer()) return "an integer";
  if (j.is_number()) return "a number";
  if (j.is_string()) return "a string";
  if (j.is_array()) return "a list";
  if (j.is_object()) return "an object";
  if (j.is_boolean()) return "a boolean";
  if (j.is_null()) return "null";
  return j.type_name();
}

const json& member(const json& obj, const std::string& key, const std::string& field,
                   const RecordContext& ctx) {
  auto it = obj.find(key);
  if (it == obj.end()) ctx.fail_field(field, "missing");
  return *it;
}

int64_t as_int(const json& j, const std::string& field, const RecordContext& ctx) {
  if (!j.is_number_integer())
    ctx.fail_field(field, "must be an integer, not " + type_name(j));
  if (j.is_number_unsigned() && j.get<uint64_t>() > static_cast<uint64_t>(INT64_MAX))
    ctx.fail_field(field, "is too large");
  return j.get<int64_t>();
}

std::string as_string(const json& j, const std::string& field, const RecordContext& ctx) {
  if (!j.is_string()) ctx.fail_field(field, "must be a string, not " + type_name(j));
  return j.get<std::string>();
}

std::vector<int64_t> as_int_list(const json& j, const std::string& field, const RecordContext& ctx) {
  if (!j.is_array()) ctx.fail_field(field, "must be a list of integers, not " + type_name(j));
  std::vector<int64_t> out;
  out.reserve(j.size());
  for (size_t i = 0; i < j.size(); ++i)
    out.push_back(as_int(j[i], field + "[" + std::to_string(i) + "]", ctx));
  return out;
}

GraphRef parse_graph(const json& g, const std::string& suffix, const RecordContext& ctx) {
  GraphRef ref;
  const std::string idx_key = "node_idx" + suffix, edge_key = "edge_index" + suffix,
                    list_key = "node_list" + suffix;
  ref.node_idx = as_int(member(g, idx_key, "graph." + idx_key, ctx), "graph." + idx_key, ctx);
  const json& e = member(g, edge_key, "graph." + edge_key, ctx);
  if (!e.is_array() || e.size() != 2)
    ctx.fail_field("graph." + edge_key, "must be a list of two lists (sources, destinations), not " +
                                            (e.is_array() ? "a list of " + std::to_string(e.size())
                                                          : type_name(e)));
  for (size_t r = 0; r < 2; ++r)
    ref.edge_index[r] = as_int_list(e[r], "graph." + edge_key + "[" + std::to_string(r) + "]", ctx);
  ref.node_list = as_int_list(member(g, list_key, "graph." + list_key, ctx), "graph." + list_key, ctx);
  return ref;
}

// JSON -> record: keys and types only; validate_instruction does the rest.
InstructionRecord parse_record(const json& j, RecordContext& ctx) {
  if (!j.is_object()) ctx.fail_field("(record)", "must be an object, not " + type_name(j));
  InstructionRecord rec;
  rec.id = as_string(member(j, "id", "id", ctx), "id", ctx);
  ctx.id = rec.id;
  ctx.id_known = true;
  rec.dataset = dataset_of_id(rec.id);
  const json& g = member(j, "graph", "graph", ctx);
  if (!g.is_object()) ctx.fail_field("graph", "must be an object, not " + type_name(g));
  if (is_link_prediction_id(rec.id)) {
    rec.graphs.push_back(parse_graph(g, "_1", ctx));
    rec.graphs.push_back(parse_graph(g, "_2", ctx));
  } else {
    rec.graphs.push_back(parse_graph(g, "", ctx));
  }
  const json& c = member(j, "conversations", "conversations", ctx);
  if (!c.is_array()) ctx.fail_field("conversations", "must be a list, not " + type_name(c));
  for (size_t i = 0; i < c.size(); ++i) {
    const std::string f = "conversations[" + std::to_string(i) + "]";
    if (!c[i].is_object()) ctx.fail_field(f, "must be an object, not " + type_name(c[i]));
    Turn t;
    t.from = as_string(member(c[i], "from", f + ".from", ctx), f + ".from", ctx);
    t.value = as_string(member(c[i], "value", f + ".value", ctx), f + ".value", ctx);
    rec.conversations.push_back(std::move(t));
  }
  return rec;
}

// Every marker and one line break right after it, until none is left: removing one can join its
// neighbours into another ("<<graph>graph>", found by tests/fuzz/instructions_fuzz.cpp). Each
// pass shortens the text.
std::string without_graph_markers(std::string value) {
  const std::string marker = kGraphMarker;
  while (value.find(marker) != std::string::npos) {
    std::string text;
    size_t pos = 0;
    for (size_t at = value.find(marker); at != std::string::npos; at = value.find(marker, pos)) {
      text += value.substr(pos, at - pos);
      pos = at + marker.size();
      if (pos < value.size() && value[pos] == '\n') ++pos;
    }
    value = text + value.substr(pos);
  }
  return value;
}

size_t count_of(const std::string& text, const std::string& what) {
  size_t n = 0;
  for (size_t pos = text.find(what); pos != std::string::npos; pos = text.find(what, pos + what.size()))
    ++n;
  return n;
}

void validate_graph(const GraphRef& g, const std::string& suffix, const RecordContext& ctx) {
  const std::string list_f = "graph.node_list" + suffix, edge_f = "graph.edge_index" + suffix,
                    idx_f = "graph.node_idx" + suffix;
  if (g.node_list.empty()) ctx.fail_field(list_f, "is empty (the centre node comes first)");
  for (size_t i = 0; i < g.node_list.size(); ++i)
    if (g.node_list[i] < 0)
      ctx.fail_field(list_f + "[" + std::to_string(i) + "]",
                     std::to_string(g.node_list[i]) + " is not a node id (negative)");
  if (g.node_idx != g.node_list[0])
    ctx.fail_field(idx_f, std::to_string(g.node_idx) + " is not node_list" + suffix + "[0] (" +
                              std::to_string(g.node_list[0]) +
                              "): node_idx is the centre's global id and the centre comes first");
  if (g.edge_index[0].size() != g.edge_index[1].size())
    ctx.fail_field(edge_f, "rows differ in length (" + std::to_string(g.edge_index[0].size()) +
                               " sources, " + std::to_string(g.edge_index[1].size()) +
                               " destinations)");
  const int64_t n = static_cast<int64_t>(g.node_list.size());
  for (size_t r = 0; r < 2; ++r)
    for (size_t i = 0; i < g.edge_index[r].size(); ++i) {
      int64_t v = g.edge_index[r][i];
      if (v < 0 || v >= n)
        ctx.fail_field(edge_f + "[" + std::to_string(r) + "][" + std::to_string(i) + "]",
                       std::to_string(v) + " is outside node_list" + suffix + " (" +
                           std::to_string(n) + " nodes; entries are local positions)");
    }
}

void validate(const InstructionRecord& rec, const RecordContext& ctx) {
  if (rec.id.empty()) ctx.fail_field("id", "is empty");
  if (rec.dataset != dataset_of_id(rec.id))
    ctx.fail_field("dataset", quoted(rec.dataset) + " is not the id's prefix " +
                                  quoted(dataset_of_id(rec.id)));
  const bool lp = is_link_prediction_id(rec.id);
  const size_t want_graphs = lp ? 2 : 1;
  // No graph and no marker: a text-only view of a record (text_only_record), valid as such.
  size_t markers_seen = 0;
  for (const Turn& t : rec.conversations) markers_seen += count_of(t.value, kGraphMarker);
  const bool text_only = rec.graphs.empty() && markers_seen == 0;
  if (rec.graphs.size() != want_graphs && !text_only)
    ctx.fail_field("graph", std::to_string(rec.graphs.size()) + " graphs, but " +
                                (lp ? "a link-prediction record (id ending in _LP) has 2"
                                    : "a record whose id does not end in _LP has 1"));
  for (size_t k = 0; k < rec.graphs.size(); ++k)
    validate_graph(rec.graphs[k], lp ? "_" + std::to_string(k + 1) : "", ctx);

  if (rec.conversations.empty()) ctx.fail_field("conversations", "is empty");
  size_t markers = 0;
  bool has_gpt = false;
  for (size_t i = 0; i < rec.conversations.size(); ++i) {
    const Turn& t = rec.conversations[i];
    const std::string f = "conversations[" + std::to_string(i) + "]";
    const char* want = i % 2 == 0 ? "human" : "gpt";
    if (t.from != "human" && t.from != "gpt")
      ctx.fail_field(f + ".from", quoted(t.from) + " is neither \"human\" nor \"gpt\"");
    if (t.from != want)
      ctx.fail_field(f + ".from", quoted(t.from) + " where \"" + want +
                                      "\" is due: turns alternate human, gpt, starting with human");
    // A question that was only its graph asks nothing in its text-only view (the zero-shot and
    // text-only evaluations read that view); every other turn must say something.
    if (t.value.empty() && !(text_only && t.from == "human")) ctx.fail_field(f + ".value", "is empty");
    for (const auto& r : reserved_turn_texts())
      if (t.value.find(r) != std::string::npos)
        ctx.fail_field(f + ".value", "holds the reserved text " + quoted(r));
    const size_t m = count_of(t.value, kGraphMarker);
    // The text-only view (zero-shot rows, --eval.text_only, the LM phase) must be valid too:
    // removing a marker can join its neighbours into a reserved text ("</<graph>s>" is "</s>"),
    // found by tests/fuzz/instructions_fuzz.cpp.
    if (m) {
      const std::string without_markers = without_graph_markers(t.value);
      for (const auto& r : reserved_turn_texts())
        if (without_markers.find(r) != std::string::npos)
          ctx.fail_field(f + ".value", "holds the reserved text " + quoted(r) + " once its <graph> markers are removed");
    }
    if (t.from == "gpt") {
      has_gpt = true;
      if (m) ctx.fail_field(f + ".value", "a gpt turn holds a <graph> marker");
    }
    markers += m;
  }
  if (!has_gpt) ctx.fail_field("conversations", "has no gpt turn (nothing to learn)");
  if (markers != rec.graphs.size())
    ctx.fail_field("conversations",
                   std::to_string(markers) + " <graph> markers in the human turns, but the record has " +
                       std::to_string(rec.graphs.size()) + (rec.graphs.size() == 1 ? " graph" : " graphs"));
}

nlohmann::ordered_json graph_json(const InstructionRecord& rec) {
  nlohmann::ordered_json g = nlohmann::ordered_json::object();
  const bool lp = rec.graphs.size() == 2;
  for (size_t k = 0; k < rec.graphs.size(); ++k) {
    const std::string s = lp ? "_" + std::to_string(k + 1) : "";
    const GraphRef& r = rec.graphs[k];
    g["node_idx" + s] = r.node_idx;
    g["edge_index" + s] = nlohmann::ordered_json::array({r.edge_index[0], r.edge_index[1]});
    g["node_list" + s] = r.node_list;
  }
  return g;
}

}  // namespace

const std::vector<std::string>& reserved_turn_texts() {
  static const std::vector<std::string> r{"</s>", "<g_patch>", "<g_start>", "<g_end>"};
  return r;
}

std::string dataset_of_id(const std::string& id) { return id.substr(0, id.find('_')); }

bool is_link_prediction_id(const std::string& id) {
  size_t pos = id.rfind('_');
  return (pos == std::string::npos ? id : id.substr(pos + 1)) == "LP";
}

void validate_instruction(const InstructionRecord& record, const std::string& where, size_t index) {
  RecordContext ctx{where, index, record.id, true};
  validate(record, ctx);
}

std::vector<InstructionRecord> read_instructions(const std::string& path,
                                                 const InstructionReadOptions& options,
                                                 InstructionReadReport* report) {
  return read_instructions_text(read_file(path), path, options, report);
}

std::vector<InstructionRecord> read_instructions_text(const std::string& bytes, const std::string& path,
                                                      const InstructionReadOptions& options,
                                                      InstructionReadReport* report) {
  if (bytes.find_first_not_of(" \t\r\n") == std::string::npos) fail(path, "the file is empty");
  json doc;
  try {
    doc = json::parse(bytes);
  } catch (const json::parse_error& e) {
    fail(path, "not valid JSON (at byte " + std::to_string(e.byte) + ")");
  } catch (const json::out_of_range&) {
    // nlohmann reports a number beyond a double's range (1e400) as out_of_range 406, not as a
    // parse_error (found by tests/fuzz/instructions_fuzz.cpp).
    fail(path, "not valid JSON (a number too large for a double)");
  }
  if (!doc.is_array())
    fail(path, "the top level must be a list of instruction records, not " + type_name(doc));
  if (doc.empty()) fail(path, "the list holds no instruction records");

  InstructionReadReport local;
  InstructionReadReport& rep = report ? *report : local;
  rep = InstructionReadReport{};
  rep.total = static_cast<int64_t>(doc.size());
  std::vector<InstructionRecord> out;
  out.reserve(doc.size());
  std::unordered_map<std::string, size_t> seen;  // id -> record index
  for (size_t i = 0; i < doc.size(); ++i) {
    RecordContext ctx{path, i, "", false};
    try {
      InstructionRecord rec = parse_record(doc[i], ctx);
      validate(rec, ctx);
      auto [it, inserted] = seen.emplace(rec.id, i);
      if (!inserted)
        ctx.fail_field("id", "duplicate of record " + std::to_string(it->second));
      out.push_back(std::move(rec));
    } catch (const InputError& e) {
      if (!options.skip_invalid) throw;
      ++rep.skipped;
      if (rep.first_reasons.size() < options.max_reasons) rep.first_reasons.push_back(e.what());
    }
    doc[i] = nullptr;  // free as we go
  }
  if (out.empty())
    fail(path, "no valid instruction record (" + std::to_string(rep.skipped) +
                   " skipped; first: " + (rep.first_reasons.empty() ? "" : rep.first_reasons[0]) + ")");
  return out;
}

std::string instructions_json(const std::vector<InstructionRecord>& records, const std::string& path) {
  std::unordered_map<std::string, size_t> seen;
  for (size_t i = 0; i < records.size(); ++i) {
    RecordContext ctx{path, i, records[i].id, true};
    validate(records[i], ctx);
    auto [it, inserted] = seen.emplace(records[i].id, i);
    if (!inserted) ctx.fail_field("id", "duplicate of record " + std::to_string(it->second));
  }
  if (records.empty()) fail(path, "no instruction records to write");
  std::string text = "[\n";
  for (size_t i = 0; i < records.size(); ++i) {
    const InstructionRecord& r = records[i];
    nlohmann::ordered_json j = nlohmann::ordered_json::object();
    j["id"] = r.id;
    j["graph"] = graph_json(r);
    nlohmann::ordered_json conv = nlohmann::ordered_json::array();
    for (const Turn& t : r.conversations) {
      nlohmann::ordered_json tj = nlohmann::ordered_json::object();
      tj["from"] = t.from;
      tj["value"] = t.value;
      conv.push_back(std::move(tj));
    }
    j["conversations"] = std::move(conv);
    // Strict UTF-8: a record that cannot be written as JSON is an error naming it.
    try {
      text += j.dump();
    } catch (const nlohmann::json::type_error&) {
      RecordContext{path, i, r.id, true}.fail_field("conversations", "a value is not valid UTF-8");
    }
    text += i + 1 < records.size() ? ",\n" : "\n";
  }
  text += "]\n";
  return text;
}

void write_instructions(const std::string& path, const std::vector<InstructionRecord>& records) {
  write_file_atomic(path, instructions_json(records, path));
}

void check_node_ids(const InstructionRecord& record, int64_t num_nodes, const std::string& where) {
  RecordContext ctx{where, kNoIndex, record.id, true};
  const bool lp = record.graphs.size() == 2;
  for (size_t k = 0; k < record.graphs.size(); ++k) {
    const std::string s = lp ? "_" + std::to_string(k + 1) : "";
    const GraphRef& g = record.graphs[k];
    auto bad = [&](int64_t v) { return v < 0 || v >= num_nodes; };
    auto problem = [&](int64_t v) {
      return std::to_string(v) + " is not a row of dataset " + quoted(record.dataset) +
             "'s feature table (" + std::to_string(num_nodes) + " nodes)";
    };
    if (bad(g.node_idx)) ctx.fail_field("graph.node_idx" + s, problem(g.node_idx));
    for (size_t i = 0; i < g.node_list.size(); ++i)
      if (bad(g.node_list[i]))
        ctx.fail_field("graph.node_list" + s + "[" + std::to_string(i) + "]", problem(g.node_list[i]));
  }
}

InstructionRecord text_only_record(const InstructionRecord& record) {
  InstructionRecord out = record;
  out.graphs.clear();
  for (Turn& t : out.conversations) t.value = without_graph_markers(t.value);
  return out;
}

}  // namespace gt

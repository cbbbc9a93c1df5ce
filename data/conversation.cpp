// vicuna_v1_1 template, graph-marker expansion, and tokenisation with the loss mask built turn by
// turn (docs/graphgpt-data.md explains the choices).
#include "data/conversation.hpp"

#include <stdexcept>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "common/error.hpp"
#include "tokenizer/tokenizer.hpp"

namespace gt {

namespace {

std::string quoted(const std::string& s) {
  return nlohmann::json(s).dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
}

size_t count_markers(const std::string& text) {
  size_t n = 0;
  const std::string m = kGraphMarker;
  for (size_t pos = text.find(m); pos != std::string::npos; pos = text.find(m, pos + m.size())) ++n;
  return n;
}

// GraphGPT's three tokens, which must be registered special tokens of the tokenizer.
struct GraphTokenIds {
  int32_t patch, start, end;
};

GraphTokenIds graph_token_ids(const Tokenizer& tok) {
  int32_t ids[3];
  const char* names[3] = {"<g_patch>", "<g_start>", "<g_end>"};
  for (int i = 0; i < 3; ++i) {
    ids[i] = tok.piece_to_id(names[i]);
    if (ids[i] < 0 || tok.encode(names[i], false, false) != std::vector<int32_t>{ids[i]})
      fail(tok.source(), std::string("GraphGPT's special token ") + names[i] +
                             " is not registered (add <g_patch>, <g_start>, <g_end> first)");
  }
  return {ids[0], ids[1], ids[2]};
}

// The ids of text as it continues after a token (no SentencePiece dummy prefix), which is how
// the tokenizer treats text after a special token (tokenizer/tokenizer.hpp, HF legacy=False):
// encode "<g_end>" + text and drop the <g_end>.
std::vector<int32_t> encode_continuation(const Tokenizer& tok, const GraphTokenIds& g,
                                         const std::string& text) {
  std::vector<int32_t> ids = tok.encode("<g_end>" + text, false, false);
  if (ids.empty() || ids[0] != g.end)
    throw std::logic_error("encode_continuation: the sentinel <g_end> did not come first");
  ids.erase(ids.begin());
  return ids;
}

std::string record_where(const InstructionRecord& r) { return "record id " + quoted(r.id); }

}  // namespace

std::string vicuna_v1_1_prompt(const std::vector<Turn>& turns, const std::string& system) {
  // FastChat Conversation.get_prompt(), SeparatorStyle.TWO.
  const std::string seps[2] = {kVicunaSep, kVicunaSep2};
  std::string ret = system + seps[0];
  for (size_t i = 0; i < turns.size(); ++i) {
    const char* want = i % 2 == 0 ? "human" : "gpt";
    if (turns[i].from != want)
      fail("conversation", "turn " + std::to_string(i) + " is from " + quoted(turns[i].from) +
                               " where \"" + want + "\" is due (human, gpt, ... from human)");
    const std::string role = i % 2 == 0 ? kVicunaUser : kVicunaAssistant;
    if (!turns[i].value.empty())
      ret += role + ": " + turns[i].value + seps[i % 2];
    else
      ret += role + ":";
  }
  return ret;
}

std::string expand_graph_markers(const std::string& text, const std::vector<int64_t>& node_counts) {
  const size_t markers = count_markers(text);
  if (markers != node_counts.size())
    fail("<graph> markers", "the text holds " + std::to_string(markers) + " but " +
                                std::to_string(node_counts.size()) + " graph node counts were given");
  const std::string m = kGraphMarker;
  std::string out;
  size_t pos = 0, k = 0;
  for (size_t at = text.find(m); at != std::string::npos; at = text.find(m, pos)) {
    if (node_counts[k] < 1)
      fail("<graph> markers", "graph " + std::to_string(k) + " has " +
                                  std::to_string(node_counts[k]) + " nodes (at least 1)");
    out.append(text, pos, at - pos);
    out += "<g_start>";
    for (int64_t i = 0; i < node_counts[k]; ++i) out += "<g_patch>";
    out += "<g_end>";
    pos = at + m.size();
    ++k;
  }
  out.append(text, pos, std::string::npos);
  return out;
}

namespace {

// Ids with labels, built part by part from the ignored and learned parts of the conversation,
// in order: the mask is right by construction.
struct Building {
  TokenizedExample ex;
  void append(const std::vector<int32_t>& ids, bool learned) {
    for (int32_t id : ids) {
      ex.input_ids.push_back(id);
      ex.labels.push_back(learned ? id : kIgnoreIndex);
    }
  }
};

// The prompt tokenised in one go must give the same ids as the parts; otherwise a token
// straddles a mask boundary and no correct mask exists for the reference's ids.
void check_same_ids(const std::vector<int32_t>& whole, const std::vector<int32_t>& by_turn, const std::string& where) {
  if (whole == by_turn) return;
  size_t k = 0;
  while (k < whole.size() && k < by_turn.size() && whole[k] == by_turn[k]) ++k;
  fail(where, "tokenization mismatch: the whole prompt gives " + std::to_string(whole.size()) +
                  " tokens, turn by turn gives " + std::to_string(by_turn.size()) +
                  ", first difference at token " + std::to_string(k) +
                  " (a token spans a turn boundary; the loss mask would be wrong)");
}

// A human turn's text with its graphs spliced in; next_graph walks graph_node_counts.
std::string expanded_question(const std::string& value, const std::vector<int64_t>& graph_node_counts,
                              size_t& next_graph) {
  const size_t m = count_markers(value);
  std::vector<int64_t> counts(graph_node_counts.begin() + next_graph, graph_node_counts.begin() + next_graph + m);
  next_graph += m;
  return expand_graph_markers(value, counts);
}

// vicuna_v1_1 turn by turn. Round r's human part is "[system ]USER: q ASSISTANT:" (ignored), its
// answer " a" (learned: the space belongs to the answer's first piece, as SentencePiece attaches
// spaces to the following word), then EOS for "</s>" (learned). The first part starts the text
// (BOS, dummy prefix); every later part continues after a token (no dummy prefix).
TokenizedExample vicuna_ids(const InstructionRecord& record, const std::vector<int64_t>& graph_node_counts,
                            const Tokenizer& tok, const GraphTokenIds& g, const std::string& system,
                            size_t* prompt_end) {
  Building b;
  const auto& turns = record.conversations;
  std::vector<Turn> expanded;  // the same turns, for the whole-prompt cross-check
  size_t next_graph = 0;
  for (size_t i = 0; i < turns.size(); ++i) {
    if (i % 2 == 0) {
      const std::string q = expanded_question(turns[i].value, graph_node_counts, next_graph);
      expanded.push_back({turns[i].from, q});
      // FastChat writes an empty message as its role and ":" alone (a text-only view of a
      // question that was only its graph), so the turn does too.
      std::string h = std::string(i == 0 ? system + kVicunaSep : "") + kVicunaUser +
                      (q.empty() ? std::string(":") : ": " + q + kVicunaSep);
      if (i + 1 < turns.size()) h += std::string(kVicunaAssistant) + ":";
      b.append(i == 0 ? tok.encode(h, true, false) : encode_continuation(tok, g, h), false);
    } else {
      expanded.push_back(turns[i]);
      *prompt_end = b.ex.input_ids.size();  // the last assignment is the last answer's
      b.append(encode_continuation(tok, g, " " + turns[i].value), true);
      b.append({tok.eos_id()}, true);
    }
  }

  // The whole prompt, tokenised as the reference's tokenizer does it (with "</s>" as the EOS
  // special token and no dummy prefix after it).
  const std::string prompt = vicuna_v1_1_prompt(expanded, system);
  const std::string sep2 = kVicunaSep2;
  std::vector<int32_t> whole;
  size_t pos = 0;
  bool first = true;
  while (true) {
    size_t at = prompt.find(sep2, pos);
    std::string chunk = prompt.substr(pos, at == std::string::npos ? std::string::npos : at - pos);
    std::vector<int32_t> ids = first ? tok.encode(chunk, true, false) : encode_continuation(tok, g, chunk);
    whole.insert(whole.end(), ids.begin(), ids.end());
    first = false;
    if (at == std::string::npos) break;
    whole.push_back(tok.eos_id());
    pos = at + sep2.size();
  }
  check_same_ids(whole, b.ex.input_ids, record_where(record));
  return std::move(b.ex);
}

// ChatML and Llama 3 turn by turn: the ignored text runs from the head (system message, BOS
// text) through each assistant opening; each answer with its close (<|im_end|>, <|eot_id|>) is
// learned; what follows the close (ChatML's "\n") opens the next ignored run. No BOS id: the
// template's own text holds what the model starts with (Llama 3's <|begin_of_text|>; SmolLM2
// and Qwen2.5 start with none).
TokenizedExample layout_ids(const InstructionRecord& record, const std::vector<int64_t>& graph_node_counts,
                            const Tokenizer& tok, const GraphTokenIds& g, const ChatTemplate& tmpl,
                            size_t* prompt_end) {
  const std::string where = record_where(record);
  const MessageLayout l = message_layout(tmpl);
  for (const std::string& t : l.reserved) template_token_id(tmpl, tok, t);
  const auto& turns = record.conversations;
  // A turn holding the template's own tokens would open or close a message mid-text.
  for (size_t i = 0; i < turns.size(); ++i)
    for (const std::string& t : l.reserved)
      if (turns[i].value.find(t) != std::string::npos)
        fail(where, "conversations[" + std::to_string(i) + "].value holds " + chat_template_name(tmpl) +
                        "'s reserved text " + quoted(t));
  auto content = [&](const std::string& v) { return layout_content(l, v); };

  Building b;
  std::vector<Turn> expanded;  // the same turns, for the whole-prompt cross-check
  std::string ignored = l.head;
  bool at_start = true;
  auto flush_ignored = [&] {
    if (ignored.empty()) return;
    b.append(at_start ? tok.encode(ignored, false, false) : encode_continuation(tok, g, ignored), false);
    at_start = false;
    ignored.clear();
  };
  size_t next_graph = 0;
  for (size_t i = 0; i < turns.size(); ++i) {
    if (i % 2 == 0) {
      const std::string q = expanded_question(turns[i].value, graph_node_counts, next_graph);
      expanded.push_back({turns[i].from, q});
      ignored += l.user_open + content(q) + l.close + l.after_close;
      if (i + 1 < turns.size()) ignored += l.assistant_open;
    } else {
      expanded.push_back(turns[i]);
      flush_ignored();
      *prompt_end = b.ex.input_ids.size();  // the last assignment is the last answer's
      b.append(encode_continuation(tok, g, content(turns[i].value) + l.close), true);  // a user turn came first
      ignored = l.after_close;
    }
  }
  flush_ignored();

  // The whole text tokenised in one go, as HF's apply_chat_template(tokenize=True) does it
  // (the reserved texts special, no BOS id added).
  check_same_ids(tok.encode(render_chat(tmpl, expanded), false, false), b.ex.input_ids, where);
  return std::move(b.ex);
}

// The whole conversation, untruncated, and (through prompt_end) where the last gpt turn's
// answer starts: every id before it is the prompt of the last answer (it ends with that turn's
// "ASSISTANT:", or ChatML's "<|im_start|>assistant\n").
TokenizedExample tokenize_whole(const InstructionRecord& record, const std::vector<int64_t>& graph_node_counts,
                                const Tokenizer& tok, int64_t max_len, const ChatTemplate& tmpl,
                                size_t* prompt_end) {
  const std::string where = record_where(record);
  validate_instruction(record, "");
  if (max_len < 1) fail(where, "max_len " + std::to_string(max_len) + " must be at least 1");
  if (graph_node_counts.size() != record.graphs.size())
    fail(where, std::to_string(graph_node_counts.size()) + " graph node counts for " +
                    std::to_string(record.graphs.size()) + " graphs");
  for (size_t k = 0; k < graph_node_counts.size(); ++k)
    if (graph_node_counts[k] < 1)
      fail(where, "graph " + std::to_string(k) + " has " + std::to_string(graph_node_counts[k]) +
                      " nodes (at least 1)");
  if (tmpl.format == ChatFormat::kVicunaV11 && (tok.bos_id() < 0 || tok.eos_id() < 0))
    fail(tok.source(), "the tokenizer needs BOS and EOS tokens for vicuna_v1_1");
  const GraphTokenIds g = graph_token_ids(tok);

  TokenizedExample ex = tmpl.format == ChatFormat::kVicunaV11
                            ? vicuna_ids(record, graph_node_counts, tok, g, vicuna_system(tmpl), prompt_end)
                            : layout_ids(record, graph_node_counts, tok, g, tmpl, prompt_end);

  // Graph spans: each <g_start> <g_patch>xN <g_end>, in order.
  for (size_t p = 0; p < ex.input_ids.size(); ++p) {
    if (ex.input_ids[p] != g.start) continue;
    size_t s = p + 1, e = s;
    while (e < ex.input_ids.size() && ex.input_ids[e] == g.patch) ++e;
    const size_t k = ex.graph_spans.size();
    if (e >= ex.input_ids.size() || ex.input_ids[e] != g.end || k >= graph_node_counts.size() ||
        static_cast<int64_t>(e - s) != graph_node_counts[k])
      fail(where, "graph " + std::to_string(k) + "'s tokens are not <g_start> <g_patch> x " +
                      (k < graph_node_counts.size() ? std::to_string(graph_node_counts[k]) : "?") +
                      " <g_end>");
    ex.graph_spans.push_back({static_cast<int64_t>(s), static_cast<int64_t>(e)});
    p = e;
  }
  if (ex.graph_spans.size() != graph_node_counts.size())
    fail(where, std::to_string(ex.graph_spans.size()) + " graphs in the tokens, " +
                    std::to_string(graph_node_counts.size()) + " expected");
  return ex;
}

}  // namespace

TokenizedExample tokenize_conversation(const InstructionRecord& record,
                                       const std::vector<int64_t>& graph_node_counts,
                                       const Tokenizer& tok, int64_t max_len, const ChatTemplate& tmpl) {
  const std::string where = record_where(record);
  size_t prompt_end = 0;
  TokenizedExample ex = tokenize_whole(record, graph_node_counts, tok, max_len, tmpl, &prompt_end);

  // Truncation at max_len (the reference's model_max_length). A graph must stay whole: its
  // patch positions receive the node embeddings.
  if (static_cast<int64_t>(ex.input_ids.size()) > max_len) {
    for (size_t k = 0; k < ex.graph_spans.size(); ++k)
      if (ex.graph_spans[k][1] + 1 > max_len)  // its <g_end> is at graph_spans[k][1]
        fail(where, "the conversation is " + std::to_string(ex.input_ids.size()) +
                        " tokens and max_len " + std::to_string(max_len) + " cuts graph " +
                        std::to_string(k) + " (tokens " + std::to_string(ex.graph_spans[k][0] - 1) +
                        ".." + std::to_string(ex.graph_spans[k][1]) + ")");
    ex.input_ids.resize(static_cast<size_t>(max_len));
    ex.labels.resize(static_cast<size_t>(max_len));
    ex.truncated = true;
  }
  return ex;
}

TokenizedExample tokenize_prompt(const InstructionRecord& record, const std::vector<int64_t>& graph_node_counts,
                                 const Tokenizer& tok, int64_t max_len, const ChatTemplate& tmpl) {
  const std::string where = record_where(record);
  if (record.conversations.size() < 2 || record.conversations.back().from != "gpt")
    fail(where, "conversations: the last turn must be the gpt answer the prompt asks for");
  size_t prompt_end = 0;
  TokenizedExample ex = tokenize_whole(record, graph_node_counts, tok, max_len, tmpl, &prompt_end);
  ex.input_ids.resize(prompt_end);
  ex.labels.assign(prompt_end, kIgnoreIndex);
  // Graphs sit in human turns, so every span lies in the prompt; checked all the same.
  for (size_t k = 0; k < ex.graph_spans.size(); ++k)
    if (ex.graph_spans[k][1] >= static_cast<int64_t>(prompt_end))
      fail(where, "graph " + std::to_string(k) + " lies in the answer, not in the prompt");
  if (static_cast<int64_t>(prompt_end) > max_len)
    fail(where, "the prompt is " + std::to_string(prompt_end) + " tokens, longer than max_len " +
                    std::to_string(max_len) + " (a prompt is never cut: raise [data].max_len)");
  return ex;
}

void pad_example(TokenizedExample& example, int64_t length, int32_t pad_id) {
  if (length < static_cast<int64_t>(example.input_ids.size()))
    throw std::invalid_argument("pad_example: length " + std::to_string(length) +
                                " is shorter than the example (" +
                                std::to_string(example.input_ids.size()) + ")");
  example.input_ids.resize(static_cast<size_t>(length), pad_id);
  example.labels.resize(static_cast<size_t>(length), kIgnoreIndex);
}

}  // namespace gt

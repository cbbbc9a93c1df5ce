// vicuna_v1_1 and ChatML templates, graph-marker expansion, tokenisation and the loss mask.
#include <gtest/gtest.h>

#include <array>
#include <cstdio>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "data/chat_template.hpp"
#include "data/conversation.hpp"
#include "data/instructions.hpp"
#include "tests/assets.hpp"
#include "tests/input_error.hpp"
#include "tokenizer/tokenizer.hpp"

namespace {

using gt::test::input_error_of;

gt::InstructionRecord make_record(const std::string& id, std::vector<gt::Turn> turns,
                                  std::vector<int64_t> node_counts = {3}) {
  gt::InstructionRecord r;
  r.id = id;
  r.dataset = gt::dataset_of_id(id);
  for (size_t k = 0; k < node_counts.size(); ++k) {
    gt::GraphRef g;
    for (int64_t i = 0; i < node_counts[k]; ++i) g.node_list.push_back(100 * (k + 1) + i);
    g.node_idx = g.node_list[0];
    for (int64_t i = 1; i < node_counts[k]; ++i) {
      g.edge_index[0].push_back(i);
      g.edge_index[1].push_back(0);
    }
    r.graphs.push_back(g);
  }
  r.conversations = std::move(turns);
  return r;
}

const char* kSystem =
    "A chat between a curious user and an artificial intelligence assistant. The assistant gives "
    "helpful, detailed, and polite answers to the user's questions.";

// FastChat's get_prompt() for vicuna_v1_1, written out by hand from its definition
// (sep_style TWO, sep " ", sep2 "</s>"): system + " " + "USER: " + q + " " + "ASSISTANT: " + a + "</s>" ...
TEST(Conversation, VicunaPromptIsFastChatsText) {
  std::vector<gt::Turn> turns = {{"human", "Hi?"}, {"gpt", "Hello."}, {"human", "More?"}, {"gpt", "Sure."}};
  EXPECT_EQ(gt::vicuna_v1_1_prompt(turns),
            "A chat between a curious user and an artificial intelligence assistant. The assistant gives "
            "helpful, detailed, and polite answers to the user's questions. USER: Hi? ASSISTANT: Hello.</s>"
            "USER: More? ASSISTANT: Sure.</s>");
  turns.pop_back();  // ends with a question: "USER: q " as FastChat writes it
  EXPECT_EQ(gt::vicuna_v1_1_prompt(turns), std::string(kSystem) +
                                               " USER: Hi? ASSISTANT: Hello.</s>USER: More? ");
  EXPECT_EQ(gt::vicuna_v1_1_prompt({{"human", "q"}, {"gpt", ""}}), std::string(kSystem) + " USER: q ASSISTANT:");
  EXPECT_NE(input_error_of([] { gt::vicuna_v1_1_prompt({{"gpt", "a"}}); }).find("turn 0"), std::string::npos);
}

TEST(Conversation, ExpandGraphMarkers) {
  EXPECT_EQ(gt::expand_graph_markers("a <graph> b <graph>.", {2, 1}),
            "a <g_start><g_patch><g_patch><g_end> b <g_start><g_patch><g_end>.");
  EXPECT_EQ(gt::expand_graph_markers("none", {}), "none");
  const std::string msg = input_error_of([] { gt::expand_graph_markers("<graph>", {1, 2}); });
  EXPECT_NE(msg.find("holds 1 but 2 graph node counts"), std::string::npos) << msg;
  EXPECT_NE(input_error_of([] { gt::expand_graph_markers("<graph>", {0}); }).find("at least 1"),
            std::string::npos);
}

// Indices where labels are learned.
std::vector<size_t> learned_positions(const gt::TokenizedExample& ex) {
  std::vector<size_t> out;
  for (size_t i = 0; i < ex.labels.size(); ++i)
    if (ex.labels[i] != gt::kIgnoreIndex) out.push_back(i);
  return out;
}

// The learned runs, each decoded, with EOS written "</s>" (decode() drops control ids).
std::vector<std::string> learned_texts(const gt::TokenizedExample& ex, const gt::Tokenizer& tok) {
  std::vector<std::string> out;
  std::vector<int32_t> run;
  auto flush = [&] {
    if (run.empty()) return;
    std::string s;
    std::vector<int32_t> text;
    for (int32_t id : run) {
      if (id == tok.eos_id()) {
        s += tok.decode(text) + "</s>";
        text.clear();
      } else {
        text.push_back(id);
      }
    }
    s += tok.decode(text);
    out.push_back(s);
    run.clear();
  };
  for (size_t i = 0; i < ex.labels.size(); ++i) {
    if (ex.labels[i] == gt::kIgnoreIndex) {
      flush();
    } else {
      EXPECT_EQ(ex.labels[i], ex.input_ids[i]) << "label " << i << " is not the input id";
      run.push_back(ex.labels[i]);
    }
  }
  flush();
  return out;
}

std::unique_ptr<gt::Tokenizer> graph_tokenizer(std::unique_ptr<gt::Tokenizer> tok) {
  tok->add_special_tokens({"<g_patch>", "<g_start>", "<g_end>"});
  return tok;
}

void expect_graph_span(const gt::TokenizedExample& ex, const gt::Tokenizer& tok, size_t k, int64_t n) {
  ASSERT_GT(ex.graph_spans.size(), k);
  const auto [s, e] = ex.graph_spans[k];
  EXPECT_EQ(e - s, n);
  EXPECT_EQ(ex.input_ids[s - 1], tok.piece_to_id("<g_start>"));
  for (int64_t i = s; i < e; ++i) EXPECT_EQ(ex.input_ids[i], tok.piece_to_id("<g_patch>"));
  EXPECT_EQ(ex.input_ids[e], tok.piece_to_id("<g_end>"));
  for (int64_t i = s - 1; i <= e; ++i) EXPECT_EQ(ex.labels[i], gt::kIgnoreIndex);
}

// Byte tokenizer (no assets needed): every byte is a token, so positions are easy to count.
TEST(Conversation, MaskWithTheByteTokenizer) {
  auto tok = graph_tokenizer(gt::byte_tokenizer());
  auto rec = make_record("cora_1", {{"human", "G <graph>?"}, {"gpt", "yes"}});
  auto ex = gt::tokenize_conversation(rec, {4}, *tok, 4096);
  const std::string human = std::string(kSystem) + " USER: G ";
  // BOS, system + " USER: G ", <g_start>, 4 x <g_patch>, <g_end>, "? ASSISTANT:", " yes", EOS
  const size_t n_prompt = 1 + human.size() + 6 + std::string("? ASSISTANT:").size();
  ASSERT_EQ(ex.input_ids.size(), n_prompt + 4 + 1);
  EXPECT_EQ(ex.labels.size(), ex.input_ids.size());
  EXPECT_EQ(ex.input_ids[0], tok->bos_id());
  std::vector<size_t> want;
  for (size_t i = n_prompt; i < n_prompt + 5; ++i) want.push_back(i);
  EXPECT_EQ(learned_positions(ex), want);
  EXPECT_EQ(learned_texts(ex, *tok), std::vector<std::string>{" yes</s>"});
  EXPECT_EQ(ex.input_ids.back(), tok->eos_id());
  ASSERT_EQ(ex.graph_spans.size(), 1u);
  EXPECT_EQ(ex.graph_spans[0][0], static_cast<int64_t>(1 + human.size() + 1));
  expect_graph_span(ex, *tok, 0, 4);
  EXPECT_FALSE(ex.truncated);

  gt::pad_example(ex, n_prompt + 8, tok->pad_id());
  EXPECT_EQ(ex.input_ids.size(), n_prompt + 8);
  for (size_t i = n_prompt + 5; i < n_prompt + 8; ++i) {
    EXPECT_EQ(ex.input_ids[i], 0);
    EXPECT_EQ(ex.labels[i], gt::kIgnoreIndex);
  }
}

// The prompt for generation is exactly the conversation's ids up to the last "ASSISTANT:".
TEST(Conversation, PromptIsTheConversationUpToTheLastAssistant) {
  auto tok = graph_tokenizer(gt::byte_tokenizer());
  auto rec = make_record("cora_test_1", {{"human", "G <graph>?"}, {"gpt", "yes"}});
  const auto full = gt::tokenize_conversation(rec, {4}, *tok, 4096);
  const auto p = gt::tokenize_prompt(rec, {4}, *tok, 4096);
  const size_t n_prompt = full.input_ids.size() - std::string(" yes").size() - 1;  // answer and EOS
  ASSERT_EQ(p.input_ids.size(), n_prompt);
  EXPECT_EQ(p.input_ids, std::vector<int32_t>(full.input_ids.begin(), full.input_ids.begin() + n_prompt));
  EXPECT_EQ(p.labels, std::vector<int32_t>(n_prompt, gt::kIgnoreIndex));
  EXPECT_EQ(p.graph_spans, full.graph_spans);
  EXPECT_FALSE(p.truncated);
  EXPECT_EQ(tok->decode(std::vector<int32_t>(p.input_ids.end() - 12, p.input_ids.end())), "? ASSISTANT:");

  // Several rounds: everything through the last "ASSISTANT:", earlier answers included.
  auto multi = make_record("cora_test_2", {{"human", "A <graph>?"}, {"gpt", "x"}, {"human", "B?"}, {"gpt", "zz"}});
  const auto mfull = gt::tokenize_conversation(multi, {2}, *tok, 4096);
  const auto mp = gt::tokenize_prompt(multi, {2}, *tok, 4096);
  const size_t m = mfull.input_ids.size() - 3 - 1;  // " zz" and EOS
  ASSERT_EQ(mp.input_ids.size(), m);
  EXPECT_EQ(mp.input_ids, std::vector<int32_t>(mfull.input_ids.begin(), mfull.input_ids.begin() + m));
  EXPECT_EQ(mp.labels, std::vector<int32_t>(m, gt::kIgnoreIndex));

  // A prompt is never cut: max_len below its length is an error naming the record.
  EXPECT_EQ(gt::tokenize_prompt(rec, {4}, *tok, static_cast<int64_t>(n_prompt)).input_ids, p.input_ids);
  std::string msg = input_error_of([&] { gt::tokenize_prompt(rec, {4}, *tok, static_cast<int64_t>(n_prompt) - 1); });
  EXPECT_NE(msg.find("record id \"cora_test_1\""), std::string::npos) << msg;
  EXPECT_NE(msg.find("longer than max_len"), std::string::npos) << msg;
  // No final answer to prompt for.
  auto open_q = make_record("cora_test_3", {{"human", "A <graph>?"}, {"gpt", "x"}, {"human", "B?"}});
  msg = input_error_of([&] { gt::tokenize_prompt(open_q, {2}, *tok, 4096); });
  EXPECT_NE(msg.find("last turn must be the gpt answer"), std::string::npos) << msg;
}

TEST(Conversation, BadArgumentsNameTheRecordOrTokenizer) {
  auto plain = gt::byte_tokenizer();
  auto rec = make_record("cora_1", {{"human", "<graph>?"}, {"gpt", "yes"}});
  std::string msg = input_error_of([&] { gt::tokenize_conversation(rec, {3}, *plain, 100); });
  EXPECT_NE(msg.find("<built-in byte tokenizer>"), std::string::npos) << msg;
  EXPECT_NE(msg.find("<g_patch>"), std::string::npos) << msg;
  auto tok = graph_tokenizer(gt::byte_tokenizer());
  msg = input_error_of([&] { gt::tokenize_conversation(rec, {3, 4}, *tok, 100); });
  EXPECT_NE(msg.find("record id \"cora_1\""), std::string::npos) << msg;
  msg = input_error_of([&] { gt::tokenize_conversation(rec, {0}, *tok, 100); });
  EXPECT_NE(msg.find("at least 1"), std::string::npos) << msg;
  auto bad = rec;
  bad.conversations[1].from = "human";
  msg = input_error_of([&] { gt::tokenize_conversation(bad, {3}, *tok, 100); });
  EXPECT_NE(msg.find("record id \"cora_1\": conversations[1].from"), std::string::npos) << msg;
}

// A tokenizer whose vocabulary has one piece spanning ": " (bytes otherwise): the whole prompt
// puts "ASSISTANT: a" as [..., ": ", "a"], turn by turn gives [..., ":", " ", "a"]. No mask is
// right for the whole-prompt ids, so this is an error naming the record.
class ColonSpaceTokenizer : public gt::Tokenizer {
 public:
  ColonSpaceTokenizer() : gt::Tokenizer("<colon-space test tokenizer>", 0, 1, 2, 0) {}

 protected:
  int32_t base_vocab_size() const override { return 260; }
  void encode_text(std::string_view text, bool, std::vector<int32_t>& out) const override {
    for (size_t i = 0; i < text.size(); ++i) {
      if (text[i] == ':' && i + 1 < text.size() && text[i + 1] == ' ') {
        out.push_back(259);
        ++i;
      } else {
        out.push_back(3 + static_cast<unsigned char>(text[i]));
      }
    }
  }
  std::string base_piece(int32_t id) const override {
    if (id == 0) return "<unk>";
    if (id == 1) return "<s>";
    if (id == 2) return "</s>";
    if (id == 259) return ":\xe2\x96\x81";
    char buf[8];
    std::snprintf(buf, sizeof buf, "<0x%02X>", id - 3);
    return buf;
  }
  int32_t base_piece_to_id(const std::string& piece) const override {
    for (int32_t i = 0; i < 260; ++i)
      if (base_piece(i) == piece) return i;
    return -1;
  }
  float base_score(int32_t) const override { return 0; }
  bool adds_dummy_prefix() const override { return false; }
};

TEST(Conversation, TokenizationMismatchIsAnErrorNamingTheRecord) {
  ColonSpaceTokenizer tok;
  tok.add_special_tokens({"<g_patch>", "<g_start>", "<g_end>"});
  auto rec = make_record("arxiv_train_5", {{"human", "<graph>"}, {"gpt", "x"}});
  const std::string msg = input_error_of([&] { gt::tokenize_conversation(rec, {2}, tok, 4096); });
  EXPECT_NE(msg.find("record id \"arxiv_train_5\": tokenization mismatch"), std::string::npos) << msg;
  EXPECT_EQ(msg.find('\n'), std::string::npos);
}

// ---- The real LLaMA tokenizer, with GraphGPT's three tokens at 32000..32002. ----

std::unique_ptr<gt::Tokenizer> llama_tokenizer(const std::string& assets) {
  auto tok = gt::load_tokenizer(assets + "/llm/tokenizer.model");
  auto ids = tok->add_special_tokens({"<g_patch>", "<g_start>", "<g_end>"});
  EXPECT_EQ(ids, (std::vector<int32_t>{32000, 32001, 32002}));
  return tok;
}

// The whole FastChat prompt text, tokenised in one go by a tokenizer on which "</s>" is a
// special token (as HF's LlamaTokenizer has it): an independent check of the turn-by-turn ids.
std::vector<int32_t> whole_prompt_ids(const std::string& assets, const gt::InstructionRecord& rec,
                                      const std::vector<int64_t>& counts) {
  auto tok = llama_tokenizer(assets);
  EXPECT_EQ(tok->add_special_tokens({"</s>"}), std::vector<int32_t>{2});
  std::vector<gt::Turn> turns = rec.conversations;
  size_t k = 0;
  for (auto& t : turns) {
    size_t m = 0;
    for (size_t p = t.value.find("<graph>"); p != std::string::npos; p = t.value.find("<graph>", p + 1)) ++m;
    t.value = gt::expand_graph_markers(t.value, std::vector<int64_t>(counts.begin() + k, counts.begin() + k + m));
    k += m;
  }
  return tok->encode(gt::vicuna_v1_1_prompt(turns), true, false);
}

TEST(ConversationLlama, LiteralEosTextIsNotEosUnlessRegistered) {
  GT_REQUIRE_ASSETS(assets);
  auto tok = llama_tokenizer(assets);
  // The tokenizer treats only registered special tokens as such: the text "</s>" is plain text.
  EXPECT_NE(tok->encode("a</s>", false, false), (std::vector<int32_t>{tok->encode("a", false, false)[0], 2}));
  tok->add_special_tokens({"</s>"});
  EXPECT_EQ(tok->encode("a</s>", false, false), (std::vector<int32_t>{tok->encode("a", false, false)[0], 2}));
}

TEST(ConversationLlama, WorkedExampleMask) {
  GT_REQUIRE_ASSETS(assets);
  auto tok = llama_tokenizer(assets);
  const std::string q =
      "Given a citation graph: <graph>, where the 0th node is the target paper. "
      "Which arXiv CS sub-category does this paper belong to?";
  auto rec = make_record("arxiv_train_1", {{"human", q}, {"gpt", "cs.LG, Machine Learning"}});
  auto ex = gt::tokenize_conversation(rec, {3}, *tok, 2048);
  // Pinned: 85 tokens; "<s> ▁A ▁chat ... ▁US ER : ▁Given ... ▁graph : ▁ <g_start> <g_patch>x3
  // <g_end> , ... ? ▁A SS IST ANT :" is ignored (0..76); "▁cs . L G , ▁Machine ▁Learning </s>"
  // is learned (77..84).
  ASSERT_EQ(ex.input_ids.size(), 85u);
  EXPECT_EQ(ex.input_ids[0], 1);
  EXPECT_EQ((std::vector<int32_t>(ex.input_ids.begin() + 72, ex.input_ids.end())),
            (std::vector<int32_t>{319, 1799, 9047, 13566, 29901, 5939, 29889, 29931, 29954, 29892, 6189,
                                  29257, 2}));
  std::vector<size_t> want;
  for (size_t i = 77; i < 85; ++i) want.push_back(i);
  EXPECT_EQ(learned_positions(ex), want);
  EXPECT_EQ(learned_texts(ex, *tok), std::vector<std::string>{"cs.LG, Machine Learning</s>"});
  ASSERT_EQ(ex.graph_spans.size(), 1u);
  EXPECT_EQ(ex.graph_spans[0], (std::array<int64_t, 2>{42, 45}));
  expect_graph_span(ex, *tok, 0, 3);
  EXPECT_FALSE(ex.truncated);

  // The same ids as the whole FastChat prompt tokenised in one go with "</s>" special.
  EXPECT_EQ(ex.input_ids, whole_prompt_ids(assets, rec, {3}));
  // And the same mask as the reference's arithmetic (preprocess_v1, one round):
  // instruction_len = len(tok(system USER: q ASSISTANT: )) - 2, round_len = len(tok(round)).
  const std::string expanded = gt::expand_graph_markers(q, {3});
  const std::string part0 = std::string(kSystem) + " USER: " + expanded + " ASSISTANT: ";
  const size_t instruction_len = tok->encode(part0, true, false).size() - 2;
  const size_t round_len = tok->encode(part0 + "cs.LG, Machine Learning", true, false).size();
  EXPECT_EQ(1 + instruction_len, 77u);
  EXPECT_EQ(1 + round_len, ex.input_ids.size());
}

TEST(ConversationLlama, MultiRound) {
  GT_REQUIRE_ASSETS(assets);
  auto tok = llama_tokenizer(assets);
  auto rec = make_record("pubmed_train_4", {{"human", "Paper graph: <graph>. Which class?"},
                                            {"gpt", "Diabetes Mellitus Type 2"},
                                            {"human", "Why?"},
                                            {"gpt", "Its neighbours are about insulin resistance."},
                                            {"human", "Thanks."}});
  auto ex = gt::tokenize_conversation(rec, {5}, *tok, 2048);
  EXPECT_EQ(learned_texts(ex, *tok),
            (std::vector<std::string>{"Diabetes Mellitus Type 2</s>",
                                      "Its neighbours are about insulin resistance.</s>"}));
  EXPECT_EQ(ex.input_ids, whole_prompt_ids(assets, rec, {5}));
  expect_graph_span(ex, *tok, 0, 5);
  // After the first "</s>" the text continues without a dummy prefix: "USER", not "▁US ER".
  const auto pos = learned_positions(ex);
  size_t first_eos = 0;
  while (ex.input_ids[first_eos] != 2) ++first_eos;
  EXPECT_EQ(tok->id_to_piece(ex.input_ids[first_eos + 1]), "USER");
  EXPECT_EQ(ex.labels[first_eos + 1], gt::kIgnoreIndex);
  // The trailing question is ignored.
  EXPECT_EQ(ex.input_ids.back(), tok->piece_to_id("\xe2\x96\x81"));
  ASSERT_EQ(ex.input_ids[pos.back()], 2);
  EXPECT_EQ(tok->decode(std::vector<int32_t>(ex.input_ids.begin() + pos.back() + 1, ex.input_ids.end())),
            "USER: Thanks. ");
}

TEST(ConversationLlama, PromptIsTheConversationPrefix) {
  GT_REQUIRE_ASSETS(assets);
  auto tok = llama_tokenizer(assets);
  auto rec = make_record("arxiv_test_1", {{"human", "Given a citation graph: <graph>. Which class?"},
                                          {"gpt", "cs.LG, Machine Learning"}});
  const auto full = gt::tokenize_conversation(rec, {3}, *tok, 2048);
  const auto p = gt::tokenize_prompt(rec, {3}, *tok, 2048);
  const auto learned = learned_positions(full);
  ASSERT_FALSE(learned.empty());
  // The prompt ends where the answer's first learned token starts, after "ASSISTANT:".
  ASSERT_EQ(p.input_ids.size(), learned.front());
  EXPECT_EQ(p.input_ids, std::vector<int32_t>(full.input_ids.begin(), full.input_ids.begin() + learned.front()));
  EXPECT_EQ(p.graph_spans, full.graph_spans);
  EXPECT_EQ(tok->id_to_piece(p.input_ids.back()), ":");
}

TEST(ConversationLlama, LinkPredictionHasTwoSpans) {
  GT_REQUIRE_ASSETS(assets);
  auto tok = llama_tokenizer(assets);
  auto rec = make_record("arxiv_test_9_LP",
                         {{"human", "Graph A: <graph>. Graph B: <graph>. Are these two central nodes connected? "
                                    "Give me a direct answer of \"yes\" or \"no\"."},
                          {"gpt", "yes"}},
                         {3, 5});
  auto ex = gt::tokenize_conversation(rec, {3, 5}, *tok, 2048);
  ASSERT_EQ(ex.graph_spans.size(), 2u);
  expect_graph_span(ex, *tok, 0, 3);
  expect_graph_span(ex, *tok, 1, 5);
  EXPECT_LT(ex.graph_spans[0][1], ex.graph_spans[1][0]);
  EXPECT_EQ(learned_texts(ex, *tok), std::vector<std::string>{"yes</s>"});
  EXPECT_EQ(ex.input_ids, whole_prompt_ids(assets, rec, {3, 5}));
}

TEST(ConversationLlama, Truncation) {
  GT_REQUIRE_ASSETS(assets);
  auto tok = llama_tokenizer(assets);
  auto rec = make_record("arxiv_train_1", {{"human", "Graph: <graph>. Category?"},
                                           {"gpt", "cs.AI, Artificial Intelligence"}});
  const auto full = gt::tokenize_conversation(rec, {10}, *tok, 2048);
  const int64_t n = static_cast<int64_t>(full.input_ids.size());
  auto ex = gt::tokenize_conversation(rec, {10}, *tok, n);
  EXPECT_FALSE(ex.truncated);
  ex = gt::tokenize_conversation(rec, {10}, *tok, n - 3);
  EXPECT_TRUE(ex.truncated);
  ASSERT_EQ(ex.input_ids.size(), static_cast<size_t>(n - 3));
  ASSERT_EQ(ex.labels.size(), static_cast<size_t>(n - 3));
  EXPECT_EQ(ex.input_ids, std::vector<int32_t>(full.input_ids.begin(), full.input_ids.begin() + (n - 3)));
  EXPECT_EQ(ex.labels, std::vector<int32_t>(full.labels.begin(), full.labels.begin() + (n - 3)));
  EXPECT_EQ(ex.graph_spans, full.graph_spans);
  // Cut right after the graph: allowed, nothing learned. One token earlier cuts <g_end>.
  const int64_t after_graph = full.graph_spans[0][1] + 1;
  ex = gt::tokenize_conversation(rec, {10}, *tok, after_graph);
  EXPECT_TRUE(learned_positions(ex).empty());
  const std::string msg = input_error_of([&] { gt::tokenize_conversation(rec, {10}, *tok, after_graph - 1); });
  EXPECT_NE(msg.find("record id \"arxiv_train_1\""), std::string::npos) << msg;
  EXPECT_NE(msg.find("cuts graph 0"), std::string::npos) << msg;
}

}  // namespace

// The text-only view: the marker and the line break after it go, the graphs go, everything
// else stays; it tokenises as the same conversation without graph tokens, labels unchanged.
TEST(Conversation, TextOnlyRecordDropsMarkersAndGraphs) {
  auto tok = graph_tokenizer(gt::byte_tokenizer());
  auto rec = make_record("cora_1", {{"human", "Given a citation graph: \n<graph>\nwhere node 0 is it. Class?"}, {"gpt", "theory"}});
  const auto text = gt::text_only_record(rec);
  EXPECT_TRUE(text.graphs.empty());
  EXPECT_EQ(text.id, rec.id);
  ASSERT_EQ(text.conversations.size(), 2u);
  EXPECT_EQ(text.conversations[0].value, "Given a citation graph: \nwhere node 0 is it. Class?");
  EXPECT_EQ(text.conversations[1].value, "theory");
  gt::validate_instruction(text, "test");  // no graph, no marker: valid

  const auto with = gt::tokenize_conversation(rec, {3}, *tok, 4096);
  const auto without = gt::tokenize_conversation(text, {}, *tok, 4096);
  EXPECT_TRUE(without.graph_spans.empty());
  // Bytes: 3 patches + start + end + "\n" fewer; the answer's learned tokens are the same.
  EXPECT_EQ(with.input_ids.size() - without.input_ids.size(), 6u);
  std::vector<int32_t> a, b;
  for (size_t i = 0; i < with.labels.size(); ++i)
    if (with.labels[i] != gt::kIgnoreIndex) a.push_back(with.labels[i]);
  for (size_t i = 0; i < without.labels.size(); ++i)
    if (without.labels[i] != gt::kIgnoreIndex) b.push_back(without.labels[i]);
  EXPECT_EQ(a, b);

  // Two graphs (link prediction), markers mid-line: both go.
  auto lp = make_record("cora_1_2_LP", {{"human", "A: <graph>, B: <graph>. Linked?"}, {"gpt", "yes"}}, {3, 2});
  EXPECT_EQ(gt::text_only_record(lp).conversations[0].value, "A: , B: . Linked?");
  EXPECT_TRUE(gt::text_only_record(lp).graphs.empty());
}

// A question that is only its graph asks nothing without it: the text-only view's human turn is
// empty, valid, and tokenises to the template around an empty question. An empty answer stays
// refused, and so does an empty question beside a graph.
TEST(Conversation, TextOnlyViewOfAGraphOnlyQuestionIsEmptyAndValid) {
  auto tok = graph_tokenizer(gt::byte_tokenizer());
  auto rec = make_record("cora_12", {{"human", "<graph>\n"}, {"gpt", "theory"}});
  const auto text = gt::text_only_record(rec);
  ASSERT_EQ(text.conversations.size(), 2u);
  EXPECT_EQ(text.conversations[0].value, "");
  gt::validate_instruction(text, "test");
  // FastChat writes an empty message as "USER:" alone; the ids built turn by turn must agree
  // with that whole text (tokenize_conversation checks it) and learn the answer alone.
  EXPECT_EQ(gt::vicuna_v1_1_prompt(text.conversations, "S"), "S USER:ASSISTANT: theory</s>");
  const auto ids = gt::tokenize_conversation(text, {}, *tok, 4096);
  EXPECT_TRUE(ids.graph_spans.empty());
  std::vector<int32_t> learned;
  for (int32_t l : ids.labels)
    if (l != gt::kIgnoreIndex) learned.push_back(l);
  std::vector<int32_t> answer = tok->encode(" theory", false, false);
  answer.push_back(tok->eos_id());
  EXPECT_EQ(learned, answer);

  auto no_answer = text;
  no_answer.conversations[1].value = "";
  EXPECT_THROW(gt::validate_instruction(no_answer, "test"), gt::InputError);
  auto empty_beside_graph = rec;
  empty_beside_graph.conversations = {{"human", "<graph>"}, {"gpt", "a"}, {"human", ""}, {"gpt", "b"}};
  try {
    gt::validate_instruction(empty_beside_graph, "test");
    ADD_FAILURE() << "an empty question beside a graph was accepted";
  } catch (const gt::InputError& e) {
    EXPECT_NE(std::string(e.what()).find("conversations[2].value: is empty"), std::string::npos) << e.what();
  }
}

// ---- ChatML (SmolLM2-Instruct's template) next to vicuna_v1_1. ----

namespace {

// The byte tokenizer with GraphGPT's tokens (259..261) and ChatML's (262, 263) registered.
std::unique_ptr<gt::Tokenizer> chatml_byte_tokenizer() {
  auto tok = graph_tokenizer(gt::byte_tokenizer());
  EXPECT_EQ(tok->add_special_tokens({"<|im_start|>", "<|im_end|>"}), (std::vector<int32_t>{262, 263}));
  return tok;
}

// The byte tokenizer's ids for plain text: byte + 3.
std::vector<int32_t> byte_ids(const std::string& text) {
  std::vector<int32_t> out;
  for (unsigned char c : text) out.push_back(3 + c);
  return out;
}

std::vector<int32_t> cat(std::initializer_list<std::vector<int32_t>> parts) {
  std::vector<int32_t> out;
  for (const auto& p : parts) out.insert(out.end(), p.begin(), p.end());
  return out;
}

const char* kSmolSystem = "You are a helpful AI assistant named SmolLM, trained by Hugging Face";

}  // namespace

// SmolLM2's chat_template (from its GGUF), rendered with jinja2 for these messages, gives this
// text byte for byte; written out here by hand.
TEST(ChatML, RenderedTextIsSmolLM2sTemplate) {
  const auto chatml = gt::ChatTemplate::chatml();
  const std::vector<gt::Turn> turns = {
      {"human", "Given a citation graph: \n<graph>\nwhere the 0th node is the target paper. Which class?"},
      {"gpt", "cs.LG, Machine Learning"}};
  const std::string want =
      "<|im_start|>system\nYou are a helpful AI assistant named SmolLM, trained by Hugging Face<|im_end|>\n"
      "<|im_start|>user\nGiven a citation graph: \n<graph>\nwhere the 0th node is the target paper. "
      "Which class?<|im_end|>\n"
      "<|im_start|>assistant\ncs.LG, Machine Learning<|im_end|>\n";
  EXPECT_EQ(gt::render_chat(chatml, turns), want);
  // The generation prompt: the question, then what opens the answer.
  const std::string prompt = gt::render_chat(chatml, {turns[0]}, /*add_generation_prompt=*/true);
  EXPECT_EQ(prompt, want.substr(0, want.size() - std::string("cs.LG, Machine Learning<|im_end|>\n").size()));
  EXPECT_EQ(prompt.substr(prompt.size() - 22), "<|im_start|>assistant\n");
  // Two rounds: every message closed by "<|im_end|>\n".
  EXPECT_EQ(gt::render_chat(chatml, {{"human", "A?"}, {"gpt", "x"}, {"human", "B?"}, {"gpt", "zz"}}),
            "<|im_start|>system\nYou are a helpful AI assistant named SmolLM, trained by Hugging Face<|im_end|>\n"
            "<|im_start|>user\nA?<|im_end|>\n<|im_start|>assistant\nx<|im_end|>\n"
            "<|im_start|>user\nB?<|im_end|>\n<|im_start|>assistant\nzz<|im_end|>\n");
  // The system message is the template's to choose.
  EXPECT_EQ(gt::render_chat(gt::ChatTemplate::chatml("Be brief."), {{"human", "q"}, {"gpt", "a"}}),
            "<|im_start|>system\nBe brief.<|im_end|>\n<|im_start|>user\nq<|im_end|>\n<|im_start|>assistant\na<|im_end|>\n");
  // Turns alternate from human, as in vicuna_v1_1; a generation prompt follows a question.
  EXPECT_NE(input_error_of([&] { gt::render_chat(chatml, {{"gpt", "a"}}); }).find("turn 0"), std::string::npos);
  EXPECT_NE(input_error_of([&] { gt::render_chat(chatml, turns, true); }).find("must end with human"),
            std::string::npos);
}

// The default template is vicuna_v1_1, byte for byte what it was.
TEST(ChatML, VicunaStaysTheDefault) {
  const std::vector<gt::Turn> turns = {{"human", "Hi?"}, {"gpt", "Hello."}};
  EXPECT_EQ(gt::ChatTemplate{}.format, gt::ChatFormat::kVicunaV11);
  EXPECT_EQ(gt::render_chat({}, turns), gt::vicuna_v1_1_prompt(turns));
  EXPECT_EQ(gt::render_chat({}, {turns[0]}, true), std::string(kSystem) + " USER: Hi? ASSISTANT:");
  auto tok = graph_tokenizer(gt::byte_tokenizer());
  auto rec = make_record("cora_1", {{"human", "G <graph>?"}, {"gpt", "yes"}});
  const auto by_default = gt::tokenize_conversation(rec, {4}, *tok, 4096);
  const auto named = gt::tokenize_conversation(rec, {4}, *tok, 4096, gt::chat_template_named("vicuna_v1_1", "t"));
  EXPECT_EQ(named.input_ids, by_default.input_ids);
  EXPECT_EQ(named.labels, by_default.labels);
  EXPECT_EQ(gt::chat_stop_id({}, *tok), 2);
  EXPECT_EQ(gt::chat_token_texts({}), std::vector<std::string>{"</s>"});
}

// GraphGPT evaluates with graphchat_v1: vicuna_v1_1's layout, its own system message, the same
// loss mask and stop token.
TEST(ChatML, GraphChatV1IsVicunaWithGraphGptsSystem) {
  const auto tmpl = gt::chat_template_named("graphchat_v1", "t");
  EXPECT_STREQ(gt::chat_template_name(tmpl), "graphchat_v1");
  EXPECT_EQ(gt::render_chat(tmpl, {{"human", "Hi?"}}, true),
            std::string("You are GraphGPT, a large language and graph-structral assistant trained by HKUDS Lab.You are "
                        "able to understand the graph structures that the user provides, and assist the user with a "
                        "variety of tasks using natural language.Follow the instructions carefully and explain your "
                        "answers in detail. USER: Hi? ASSISTANT:"));
  auto tok = graph_tokenizer(gt::byte_tokenizer());
  auto rec = make_record("cora_1", {{"human", "G <graph>?"}, {"gpt", "yes"}});
  const auto vicuna = gt::tokenize_conversation(rec, {4}, *tok, 4096);
  const auto graphchat = gt::tokenize_conversation(rec, {4}, *tok, 4096, tmpl);
  const auto text = [&](const std::vector<int32_t>& ids) { return tok->decode(ids); };
  EXPECT_NE(text(graphchat.input_ids).find("You are GraphGPT"), std::string::npos);
  // The answer and its EOS are learned in both, and nothing else.
  auto learned = [](const gt::TokenizedExample& e) {
    std::vector<int32_t> out;
    for (size_t i = 0; i < e.labels.size(); ++i)
      if (e.labels[i] != gt::kIgnoreIndex) out.push_back(e.labels[i]);
    return out;
  };
  EXPECT_EQ(learned(graphchat), learned(vicuna));
  EXPECT_EQ(gt::chat_stop_id(tmpl, *tok), gt::chat_stop_id({}, *tok));
}

TEST(ChatML, NamesStopIdAndTokenTexts) {
  EXPECT_EQ(gt::chat_template_named("chatml", "t").format, gt::ChatFormat::kChatML);
  EXPECT_EQ(gt::chat_template_named("chatml", "t").system, kSmolSystem);
  EXPECT_STREQ(gt::chat_template_name(gt::chat_template_named("chatml", "t")), "chatml");
  EXPECT_STREQ(gt::chat_template_name(gt::chat_template_named("vicuna_v1_1", "t")), "vicuna_v1_1");
  const std::string msg = input_error_of([] { gt::chat_template_named("llama2", "cfg.toml: [data].template"); });
  EXPECT_NE(msg.find("cfg.toml: [data].template: 'llama2' is not one of: vicuna_v1_1, graphchat_v1, chatml, qwen2.5, llama3"),
            std::string::npos)
      << msg;
  EXPECT_EQ(gt::chat_token_texts(gt::ChatTemplate::chatml()), (std::vector<std::string>{"<|im_start|>", "<|im_end|>"}));
  // Generation stops at <|im_end|>, not at the tokenizer's EOS.
  auto tok = chatml_byte_tokenizer();
  EXPECT_EQ(gt::chat_stop_id(gt::ChatTemplate::chatml(), *tok), 263);
  auto plain = graph_tokenizer(gt::byte_tokenizer());
  EXPECT_NE(input_error_of([&] { gt::chat_stop_id(gt::ChatTemplate::chatml(), *plain); }).find("<|im_end|> is not registered"),
            std::string::npos);
}

// Every id and every label pinned: the byte tokenizer makes each byte one id.
TEST(ChatML, ExactIdsAndMaskWithTheByteTokenizer) {
  auto tok = chatml_byte_tokenizer();
  auto rec = make_record("cora_1", {{"human", "G <graph>?"}, {"gpt", "yes"}});
  const auto ex = gt::tokenize_conversation(rec, {4}, *tok, 4096, gt::ChatTemplate::chatml());
  const int32_t S = 262, E = 263, GS = 260, GP = 259, GE = 261;
  // No BOS; <|im_start|> system\n... <|im_end|> \n <|im_start|> user\nG  <g_start> <g_patch>x4 <g_end> ?
  // <|im_end|> \n <|im_start|> assistant\n | yes <|im_end|> | \n
  const std::vector<int32_t> prompt =
      cat({{S}, byte_ids(std::string("system\n") + kSmolSystem), {E}, byte_ids("\n"), {S}, byte_ids("user\nG "),
           {GS, GP, GP, GP, GP, GE}, byte_ids("?"), {E}, byte_ids("\n"), {S}, byte_ids("assistant\n")});
  ASSERT_EQ(prompt.size(), 106u);
  EXPECT_EQ(ex.input_ids, cat({prompt, byte_ids("yes"), {E}, byte_ids("\n")}));
  ASSERT_EQ(ex.input_ids.size(), 111u);
  // Learned: "yes" and its <|im_end|> (106..109); the "\n" after it (110) and all before are not.
  EXPECT_EQ(learned_positions(ex), (std::vector<size_t>{106, 107, 108, 109}));
  EXPECT_EQ(learned_texts(ex, *tok), std::vector<std::string>{"yes<|im_end|>"});
  EXPECT_EQ(ex.labels[110], gt::kIgnoreIndex);
  EXPECT_EQ(ex.labels[109], E);
  EXPECT_NE(ex.input_ids[0], tok->bos_id());
  ASSERT_EQ(ex.graph_spans.size(), 1u);
  EXPECT_EQ(ex.graph_spans[0], (std::array<int64_t, 2>{87, 91}));
  expect_graph_span(ex, *tok, 0, 4);
  EXPECT_FALSE(ex.truncated);
  // The ids are what the whole text gives in one go (HF's apply_chat_template(tokenize=True)).
  EXPECT_EQ(ex.input_ids, tok->encode(gt::render_chat(gt::ChatTemplate::chatml(),
                                                      {{"human", gt::expand_graph_markers("G <graph>?", {4})},
                                                       {"gpt", "yes"}}),
                                      false, false));
}

// A text-only view of a question that was only its graph: ChatML writes the empty user message
// between its header and <|im_end|>; the answer alone is learned.
TEST(ChatML, EmptyQuestionOfATextOnlyView) {
  auto tok = chatml_byte_tokenizer();
  const auto text = gt::text_only_record(make_record("cora_12", {{"human", "<graph>\n"}, {"gpt", "yes"}}));
  const auto ex = gt::tokenize_conversation(text, {}, *tok, 4096, gt::ChatTemplate::chatml());
  const int32_t S = 262, E = 263;
  EXPECT_EQ(ex.input_ids, cat({{S}, byte_ids(std::string("system\n") + kSmolSystem), {E}, byte_ids("\n"), {S},
                               byte_ids("user\n"), {E}, byte_ids("\n"), {S}, byte_ids("assistant\n"),
                               byte_ids("yes"), {E}, byte_ids("\n")}));
  EXPECT_EQ(learned_texts(ex, *tok), std::vector<std::string>{"yes<|im_end|>"});
}

TEST(ChatML, MultiRoundLearnsEachAnswerAndItsImEnd) {
  auto tok = chatml_byte_tokenizer();
  auto rec = make_record("cora_test_2", {{"human", "A <graph>?"}, {"gpt", "x"}, {"human", "B?"}, {"gpt", "zz"}}, {2});
  const auto ex = gt::tokenize_conversation(rec, {2}, *tok, 4096, gt::ChatTemplate::chatml());
  EXPECT_EQ(learned_texts(ex, *tok), (std::vector<std::string>{"x<|im_end|>", "zz<|im_end|>"}));
  // After each learned <|im_end|>, the "\n" is ignored; the second round's user turn too.
  const auto pos = learned_positions(ex);
  ASSERT_EQ(pos.size(), 5u);
  EXPECT_EQ(pos[1], pos[0] + 1);
  EXPECT_EQ(ex.input_ids[pos[1]], 263);
  EXPECT_EQ(ex.input_ids[pos[1] + 1], 3 + '\n');
  EXPECT_EQ(ex.labels[pos[1] + 1], gt::kIgnoreIndex);
  EXPECT_EQ(tok->decode(std::vector<int32_t>(ex.input_ids.begin() + pos[1] + 1, ex.input_ids.begin() + pos[2])),
            "\n<|im_start|>user\nB?<|im_end|>\n<|im_start|>assistant\n");
  EXPECT_EQ(pos.back() + 2, ex.input_ids.size());  // the final "\n", ignored
  EXPECT_EQ(tok->decode(ex.input_ids),
            gt::render_chat(gt::ChatTemplate::chatml(), {{"human", gt::expand_graph_markers("A <graph>?", {2})},
                                                         {"gpt", "x"}, {"human", "B?"}, {"gpt", "zz"}}));
}

// The generation prompt ends with "<|im_start|>assistant\n" and is the training ids' prefix.
TEST(ChatML, PromptEndsWithTheAssistantHeader) {
  auto tok = chatml_byte_tokenizer();
  const auto chatml = gt::ChatTemplate::chatml();
  auto rec = make_record("cora_test_1", {{"human", "A <graph>?"}, {"gpt", "x"}, {"human", "B?"}, {"gpt", "zz"}}, {2});
  const auto full = gt::tokenize_conversation(rec, {2}, *tok, 4096, chatml);
  const auto p = gt::tokenize_prompt(rec, {2}, *tok, 4096, chatml);
  const size_t n = full.input_ids.size() - 2 - 1 - 1;  // "zz", <|im_end|>, "\n"
  ASSERT_EQ(p.input_ids.size(), n);
  EXPECT_EQ(p.input_ids, std::vector<int32_t>(full.input_ids.begin(), full.input_ids.begin() + n));
  EXPECT_EQ(p.labels, std::vector<int32_t>(n, gt::kIgnoreIndex));
  EXPECT_EQ(p.graph_spans, full.graph_spans);
  EXPECT_FALSE(p.truncated);
  const std::vector<int32_t> header = cat({{262}, byte_ids("assistant\n")});
  EXPECT_EQ(std::vector<int32_t>(p.input_ids.end() - 11, p.input_ids.end()), header);
  // HF's add_generation_prompt text for the turns before the last answer, tokenised whole.
  EXPECT_EQ(p.input_ids, tok->encode(gt::render_chat(chatml,
                                                     {{"human", gt::expand_graph_markers("A <graph>?", {2})},
                                                      {"gpt", "x"}, {"human", "B?"}},
                                                     true),
                                     false, false));
  // Never cut.
  EXPECT_EQ(gt::tokenize_prompt(rec, {2}, *tok, static_cast<int64_t>(n), chatml).input_ids, p.input_ids);
  const std::string msg = input_error_of([&] { gt::tokenize_prompt(rec, {2}, *tok, static_cast<int64_t>(n) - 1, chatml); });
  EXPECT_NE(msg.find("record id \"cora_test_1\""), std::string::npos) << msg;
  EXPECT_NE(msg.find("longer than max_len"), std::string::npos) << msg;
}

TEST(ChatML, Truncation) {
  auto tok = chatml_byte_tokenizer();
  const auto chatml = gt::ChatTemplate::chatml();
  auto rec = make_record("cora_1", {{"human", "G <graph>?"}, {"gpt", "yes"}});
  const auto full = gt::tokenize_conversation(rec, {4}, *tok, 4096, chatml);
  ASSERT_EQ(full.input_ids.size(), 111u);
  EXPECT_FALSE(gt::tokenize_conversation(rec, {4}, *tok, 111, chatml).truncated);
  // Cut inside the answer: "ye" learned, the rest gone.
  auto ex = gt::tokenize_conversation(rec, {4}, *tok, 108, chatml);
  EXPECT_TRUE(ex.truncated);
  EXPECT_EQ(ex.input_ids, std::vector<int32_t>(full.input_ids.begin(), full.input_ids.begin() + 108));
  EXPECT_EQ(ex.labels, std::vector<int32_t>(full.labels.begin(), full.labels.begin() + 108));
  EXPECT_EQ(learned_positions(ex), (std::vector<size_t>{106, 107}));
  // Right after <g_end> (at 91): allowed, nothing learned; one earlier cuts the graph.
  ex = gt::tokenize_conversation(rec, {4}, *tok, 92, chatml);
  EXPECT_TRUE(learned_positions(ex).empty());
  EXPECT_EQ(ex.graph_spans, full.graph_spans);
  const std::string msg = input_error_of([&] { gt::tokenize_conversation(rec, {4}, *tok, 91, chatml); });
  EXPECT_NE(msg.find("record id \"cora_1\""), std::string::npos) << msg;
  EXPECT_NE(msg.find("cuts graph 0"), std::string::npos) << msg;
}

TEST(ChatML, BadTokenizerOrTurnTextIsAnInputError) {
  const auto chatml = gt::ChatTemplate::chatml();
  auto rec = make_record("cora_1", {{"human", "G <graph>?"}, {"gpt", "yes"}});
  // GraphGPT's tokens but not ChatML's: named, with the token.
  auto no_chatml = graph_tokenizer(gt::byte_tokenizer());
  std::string msg = input_error_of([&] { gt::tokenize_conversation(rec, {4}, *no_chatml, 4096, chatml); });
  EXPECT_NE(msg.find("<built-in byte tokenizer>"), std::string::npos) << msg;
  EXPECT_NE(msg.find("<|im_start|> is not registered"), std::string::npos) << msg;
  auto tok = chatml_byte_tokenizer();
  auto bad = make_record("cora_2", {{"human", "G <graph>?"}, {"gpt", "yes<|im_end|>no"}});
  msg = input_error_of([&] { gt::tokenize_conversation(bad, {4}, *tok, 4096, chatml); });
  EXPECT_NE(msg.find("record id \"cora_2\": conversations[1].value holds chatml's reserved text \"<|im_end|>\""),
            std::string::npos) << msg;
  EXPECT_EQ(msg.find('\n'), std::string::npos);
}

// The SentencePiece LLaMA tokenizer (dummy prefix at the start only): the parts join up to the
// whole text's ids, and each answer is learned with its <|im_end|>.
TEST(ChatMLLlama, MaskWithSentencePiece) {
  GT_REQUIRE_ASSETS(assets);
  auto tok = llama_tokenizer(assets);
  EXPECT_EQ(tok->add_special_tokens({"<|im_start|>", "<|im_end|>"}), (std::vector<int32_t>{32003, 32004}));
  auto rec = make_record("pubmed_train_4", {{"human", "Paper graph: <graph>. Which class?"},
                                            {"gpt", "Diabetes Mellitus Type 2"},
                                            {"human", "Why?"},
                                            {"gpt", "Its neighbours are about insulin resistance."}}, {5});
  const auto ex = gt::tokenize_conversation(rec, {5}, *tok, 2048, gt::ChatTemplate::chatml());
  EXPECT_EQ(learned_texts(ex, *tok), (std::vector<std::string>{"Diabetes Mellitus Type 2<|im_end|>",
                                                               "Its neighbours are about insulin resistance.<|im_end|>"}));
  EXPECT_EQ(ex.input_ids.front(), 32003);
  EXPECT_EQ(ex.input_ids.back(), tok->piece_to_id("<0x0A>"));
  expect_graph_span(ex, *tok, 0, 5);
  EXPECT_EQ(tok->decode(ex.input_ids),
            gt::render_chat(gt::ChatTemplate::chatml(),
                            {{"human", gt::expand_graph_markers("Paper graph: <graph>. Which class?", {5})},
                             {"gpt", "Diabetes Mellitus Type 2"}, {"human", "Why?"},
                             {"gpt", "Its neighbours are about insulin resistance."}}));
}

// ---- Llama 3's header template. ----

// Meta-Llama-3-Instruct's chat_template rendered with jinja2 gives this text byte for byte: BOS
// text, no system message unless given, each content trimmed, <|eot_id|> closing each message.
TEST(Llama3Template, ExactIdsAndMaskWithTheByteTokenizer) {
  auto tok = graph_tokenizer(gt::byte_tokenizer());
  const auto ids = tok->add_special_tokens({"<|begin_of_text|>", "<|start_header_id|>", "<|end_header_id|>", "<|eot_id|>"});
  ASSERT_EQ(ids, (std::vector<int32_t>{262, 263, 264, 265}));
  const int32_t B = 262, SH = 263, EH = 264, EOT = 265, GS = 260, GP = 259, GE = 261;
  const auto llama3 = gt::ChatTemplate::llama3();
  EXPECT_STREQ(gt::chat_template_name(gt::chat_template_named("llama3", "t")), "llama3");
  EXPECT_EQ(gt::chat_stop_id(llama3, *tok), EOT);
  EXPECT_EQ(gt::render_chat(llama3, {{"human", "  Hi \n"}, {"gpt", " yes "}}),
            "<|begin_of_text|><|start_header_id|>user<|end_header_id|>\n\nHi<|eot_id|>"
            "<|start_header_id|>assistant<|end_header_id|>\n\nyes<|eot_id|>");
  EXPECT_EQ(gt::render_chat(gt::ChatTemplate::llama3("Be brief. "), {{"human", "q"}}, true),
            "<|begin_of_text|><|start_header_id|>system<|end_header_id|>\n\nBe brief.<|eot_id|>"
            "<|start_header_id|>user<|end_header_id|>\n\nq<|eot_id|><|start_header_id|>assistant<|end_header_id|>\n\n");

  auto rec = make_record("cora_1", {{"human", " G <graph>? "}, {"gpt", "yes\n"}, {"human", "B?"}, {"gpt", "zz"}});
  const auto ex = gt::tokenize_conversation(rec, {4}, *tok, 4096, llama3);
  const std::vector<int32_t> first_prompt =
      cat({{B, SH}, byte_ids("user"), {EH}, byte_ids("\n\nG "), {GS, GP, GP, GP, GP, GE}, byte_ids("?"), {EOT, SH},
           byte_ids("assistant"), {EH}, byte_ids("\n\n")});
  const std::vector<int32_t> second_prompt =
      cat({{SH}, byte_ids("user"), {EH}, byte_ids("\n\nB?"), {EOT, SH}, byte_ids("assistant"), {EH}, byte_ids("\n\n")});
  EXPECT_EQ(ex.input_ids, cat({first_prompt, byte_ids("yes"), {EOT}, second_prompt, byte_ids("zz"), {EOT}}));
  // Learned: each trimmed answer and its <|eot_id|>; nothing follows the close.
  EXPECT_EQ(learned_texts(ex, *tok), (std::vector<std::string>{"yes<|eot_id|>", "zz<|eot_id|>"}));
  const auto pos = learned_positions(ex);
  ASSERT_EQ(pos.size(), 7u);
  EXPECT_EQ(pos[0], first_prompt.size());
  EXPECT_EQ(pos.back() + 1, ex.input_ids.size());
  expect_graph_span(ex, *tok, 0, 4);
  // The generation prompt is the training ids up to the last answer.
  const auto p = gt::tokenize_prompt(rec, {4}, *tok, 4096, llama3);
  EXPECT_EQ(p.input_ids, std::vector<int32_t>(ex.input_ids.begin(), ex.input_ids.end() - 3));

  // Its special tokens must be registered, and no turn may hold one.
  auto plain = graph_tokenizer(gt::byte_tokenizer());
  std::string msg = input_error_of([&] { gt::tokenize_conversation(rec, {4}, *plain, 4096, llama3); });
  EXPECT_NE(msg.find("llama3's special token <|begin_of_text|> is not registered"), std::string::npos) << msg;
  auto bad = make_record("cora_2", {{"human", "G <graph>?"}, {"gpt", "yes<|eot_id|>no"}});
  msg = input_error_of([&] { gt::tokenize_conversation(bad, {4}, *tok, 4096, llama3); });
  EXPECT_NE(msg.find("conversations[1].value holds llama3's reserved text \"<|eot_id|>\""), std::string::npos) << msg;
}

// Llama-3.1-Instruct's chat_template rendered with jinja2 gives this text byte for byte: its
// system message always there, dated, the given one trimmed after the date.
TEST(Llama3Template, Llama31WritesTheDatedSystemMessage) {
  const auto t = gt::chat_template_named("llama3.1", "t");
  EXPECT_STREQ(gt::chat_template_name(t), "llama3.1");
  const std::string sys = "<|begin_of_text|><|start_header_id|>system<|end_header_id|>\n\n"
                          "Cutting Knowledge Date: December 2023\nToday Date: 26 Jul 2024\n\n";
  EXPECT_EQ(gt::render_chat(t, {{"human", " Hi "}, {"gpt", "yes\n"}}),
            sys + "<|eot_id|><|start_header_id|>user<|end_header_id|>\n\nHi<|eot_id|>"
                  "<|start_header_id|>assistant<|end_header_id|>\n\nyes<|eot_id|>");
  EXPECT_EQ(gt::render_chat(gt::ChatTemplate::llama3_1(" Be brief.\n"), {{"human", "q"}}, true),
            sys + "Be brief.<|eot_id|><|start_header_id|>user<|end_header_id|>\n\nq<|eot_id|>"
                  "<|start_header_id|>assistant<|end_header_id|>\n\n");
  // The same special tokens as 3.0's: a tokenizer that has them takes either.
  EXPECT_EQ(gt::chat_token_texts(t), gt::chat_token_texts(gt::ChatTemplate::llama3()));
}

// Qwen2.5's template is ChatML with Qwen's own default system message.
TEST(ChatML, Qwen25IsChatMLWithItsSystemMessage) {
  const auto q = gt::chat_template_named("qwen2.5", "t");
  EXPECT_EQ(q.format, gt::ChatFormat::kChatML);
  EXPECT_STREQ(gt::chat_template_name(q), "qwen2.5");
  EXPECT_EQ(gt::render_chat(q, {{"human", "Hi"}}, true),
            "<|im_start|>system\nYou are Qwen, created by Alibaba Cloud. You are a helpful assistant.<|im_end|>\n"
            "<|im_start|>user\nHi<|im_end|>\n<|im_start|>assistant\n");
}

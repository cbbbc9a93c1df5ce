// vicuna_v1_1 template, graph-marker expansion, tokenisation and the loss mask.
#include <gtest/gtest.h>

#include <array>
#include <cstdio>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "data/conversation.hpp"
#include "data/instructions.hpp"
#include "model/tokenizer.hpp"
#include "tests/assets.hpp"
#include "tests/input_error.hpp"

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

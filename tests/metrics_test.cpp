// Evaluation metrics on hand-computed cases: class parsing, accuracy, macro-F1, confusion,
// unparsed answers, GraphGPT's top-3 containment, yes/no parsing, AUC with ties, metrics.json
// and the predictions JSONL.
#include <gtest/gtest.h>

#include <cmath>
#include <nlohmann/json.hpp>

#include "common/atomic_file.hpp"
#include "data/metrics.hpp"
#include "tests/input_error.hpp"
#include "tests/temp_dir.hpp"

namespace {

using gt::test::input_error_of;

bool contains(const std::string& s, const std::string& part) { return s.find(part) != std::string::npos; }

TEST(Metrics, NormaliseAnswer) {
  EXPECT_EQ(gt::normalise_answer("  Neural   Networks.</s>\n"), "neural networks");
  EXPECT_EQ(gt::normalise_answer("\"cs.AI\""), "cs.ai");
  EXPECT_EQ(gt::normalise_answer("THEORY!! </s>  "), "theory");
  EXPECT_EQ(gt::normalise_answer("..."), "");
}

TEST(Metrics, ParseClassExactThenFirstMention) {
  const std::vector<std::string> cls = {"learning", "Machine Learning", "ai"};
  EXPECT_EQ(gt::parse_class("Machine learning</s>", cls), 1);
  // The shorter name inside the longer mention does not count: longest wins on overlap.
  EXPECT_EQ(gt::parse_class("I think it is machine learning.", cls), 1);
  // Otherwise the earliest mention wins.
  EXPECT_EQ(gt::parse_class("learning about machine learning", cls), 0);
  // Mentions must not be glued to letters or digits: "ai" is not in "said" or "ai2".
  EXPECT_EQ(gt::parse_class("he said so, ai2", cls), -1);
  EXPECT_EQ(gt::parse_class("(AI)", cls), 2);
  EXPECT_EQ(gt::parse_class("", cls), -1);

  const std::vector<std::string> arxiv = {"cs.LG", "cs.AI", "cs.CV", "cs.CL"};
  EXPECT_EQ(gt::parse_class("The answer is cs.AI, then cs.LG", arxiv), 1);
  EXPECT_EQ(gt::mentioned_classes("cs.CV or cs.AI, then cs.LG, cs.AI again, cs.CL", arxiv),
            (std::vector<int32_t>{2, 1, 0, 3}));
}

// Worked example. Classes A = "Neural Networks", B = "Theory", C = "Genetic Algorithms",
// D = "Robotics" (never true, never predicted).
//   #  true  answer                                              parsed  top-3 list      in top 3
//   1  A     "Neural Networks"                                   A       [A]             yes
//   2  A     "The paper is about theory and neural networks."    B       [B, A]          yes
//   3  A     "neural networks</s>"                               A       [A]             yes
//   4  B     "Theory"                                            B       [B]             yes
//   5  B     "I cannot tell."                                    none    []              no
//   6  C     "genetic algorithms"                                C       [C]             yes
//   7  C     "Theory"                                            B       [B]             no
//   8  B     "  THEORY!! "                                       B       [B]             yes
// correct = {1, 3, 4, 6, 8} = 5 -> accuracy 5/8; unparsed = 1; top-3 containment 6/8.
// Confusion [true][pred] (columns A B C D none):
//   A: 2 1 0 0 0   B: 0 2 0 0 1   C: 0 1 1 0 0   D: 0 0 0 0 0
// F1 = 2TP / (2TP + FP + FN):
//   A: TP 2, FP 0, FN 1 -> 4/5;  B: TP 2, FP 2 (#2, #7), FN 1 (#5) -> 4/7;  C: TP 1, FP 0, FN 1 -> 2/3
//   D: no support, no prediction -> left out.
// macro-F1 = (4/5 + 4/7 + 2/3) / 3 = (84 + 60 + 70) / 105 / 3 = 214/315 ~ 0.6794.
// (sklearn: f1_score(y_true, y_pred, labels=["A","B","C"], average="macro") gives the same;
// counting D as well would give 214/420.)
TEST(Metrics, ClassificationWorkedExample) {
  const std::vector<std::string> cls = {"Neural Networks", "Theory", "Genetic Algorithms", "Robotics"};
  const std::vector<std::string> pred = {"Neural Networks",
                                         "The paper is about theory and neural networks.",
                                         "neural networks</s>",
                                         "Theory",
                                         "I cannot tell.",
                                         "genetic algorithms",
                                         "Theory",
                                         "  THEORY!! "};
  const std::vector<int32_t> labels = {0, 0, 0, 1, 1, 2, 2, 1};
  auto m = gt::classification_metrics(pred, labels, cls);
  EXPECT_EQ(m.n, 8);
  EXPECT_EQ(m.correct, 5);
  EXPECT_EQ(m.unparsed, 1);
  EXPECT_DOUBLE_EQ(m.accuracy, 5.0 / 8.0);
  EXPECT_DOUBLE_EQ(m.top3_containment, 6.0 / 8.0);
  EXPECT_NEAR(m.macro_f1, 214.0 / 315.0, 1e-12);
  const std::vector<std::vector<int64_t>> want = {
      {2, 1, 0, 0, 0}, {0, 2, 0, 0, 1}, {0, 1, 1, 0, 0}, {0, 0, 0, 0, 0}};
  EXPECT_EQ(m.confusion, want);

  auto j = nlohmann::json::parse(gt::metrics_json(m, cls));
  EXPECT_EQ(j["task"], "node_classification");
  EXPECT_EQ(j["n"], 8);
  EXPECT_EQ(j["unparsed"], 1);
  EXPECT_DOUBLE_EQ(j["accuracy"].get<double>(), 0.625);
  EXPECT_DOUBLE_EQ(j["top3_containment"].get<double>(), 0.75);
  EXPECT_NEAR(j["macro_f1"].get<double>(), 214.0 / 315.0, 1e-12);
  EXPECT_EQ(j["confusion_columns"].size(), 5u);
  EXPECT_EQ(j["confusion_columns"][4], "none");
  EXPECT_EQ(j["confusion"].get<std::vector<std::vector<int64_t>>>(), want);
}

TEST(Metrics, TopThreeContainmentStopsAtThree) {
  const std::vector<std::string> cls = {"a1", "b2", "c3", "d4"};
  // The true class is the fourth distinct mention: wrong for top-3; the repeat of a1 does not count twice.
  auto m = gt::classification_metrics({"a1 a1 b2 c3 d4", "b2 a1 d4", "c3"}, {3, 3, 3}, cls);
  EXPECT_DOUBLE_EQ(m.top3_containment, 1.0 / 3.0);
  EXPECT_EQ(m.correct, 0);
  EXPECT_EQ(m.unparsed, 0);
  EXPECT_DOUBLE_EQ(m.macro_f1, 0.0);  // d4: TP 0; a1, b2, c3: predicted but never true -> 0
}

TEST(Metrics, ClassificationInputErrors) {
  EXPECT_TRUE(contains(input_error_of([] { gt::classification_metrics({"a"}, {0, 1}, {"a", "b"}); }),
                       "1 predictions but 2 labels"));
  EXPECT_TRUE(contains(input_error_of([] { gt::classification_metrics({"a"}, {2}, {"a", "b"}); }),
                       "outside the 2 classes"));
  EXPECT_TRUE(contains(input_error_of([] { gt::classification_metrics({"a"}, {0}, {"Theory", "theory."}); }),
                       "both \"theory\""));
  auto empty = gt::classification_metrics({}, {}, {"a"});
  EXPECT_EQ(empty.n, 0);
  EXPECT_EQ(empty.accuracy, 0.0);
  EXPECT_EQ(empty.macro_f1, 0.0);
}

TEST(Metrics, YesNoParsing) {
  EXPECT_EQ(gt::parse_yes_no("Yes."), 1);
  EXPECT_EQ(gt::parse_yes_no("  **YES**, they are linked"), 1);
  EXPECT_EQ(gt::parse_yes_no("no, they are not"), 0);
  EXPECT_EQ(gt::parse_yes_no("No</s>"), 0);
  EXPECT_EQ(gt::parse_yes_no("Yesterday"), -1);
  EXPECT_EQ(gt::parse_yes_no("Nope"), -1);
  EXPECT_EQ(gt::parse_yes_no("I think yes"), -1);
  EXPECT_EQ(gt::parse_yes_no(""), -1);
}

// answers -> scores [1, 0, 1, 0.5 (unparsed), 0], labels [1, 0, 0, 1, 0].
// Positives score {1, 0.5}, negatives {0, 1, 0}. Pairs (pos > neg = 1, tie = 1/2):
//   1: vs 0 -> 1, vs 1 -> 1/2, vs 0 -> 1;  0.5: vs 0 -> 1, vs 1 -> 0, vs 0 -> 1   => 4.5 / 6 = 0.75.
// correct: #1, #2, #5 -> 3/5.
TEST(Metrics, LinkPredictionAucWithTies) {
  auto m = gt::link_metrics({"Yes.", "no, they are not", "  YES", "Yesterday", "No"}, {1, 0, 0, 1, 0});
  EXPECT_EQ(m.n, 5);
  EXPECT_EQ(m.unparsed, 1);
  EXPECT_DOUBLE_EQ(m.accuracy, 0.6);
  EXPECT_DOUBLE_EQ(m.auc, 0.75);

  // All "yes": every pair ties -> 0.5. Perfect answers -> 1; inverted -> 0.
  EXPECT_DOUBLE_EQ(gt::link_metrics({"yes", "yes", "yes", "yes"}, {1, 0, 1, 0}).auc, 0.5);
  EXPECT_DOUBLE_EQ(gt::link_metrics({"yes", "no", "yes"}, {1, 0, 1}).auc, 1.0);
  EXPECT_DOUBLE_EQ(gt::link_metrics({"no", "yes", "no"}, {1, 0, 1}).auc, 0.0);
  // Continuous scores, ties between classes: pos {0.9, 0.4}, neg {0.4, 0.1} -> (1 + 1 + 0.5 + 1) / 4.
  EXPECT_DOUBLE_EQ(gt::roc_auc({0.9, 0.4, 0.4, 0.1}, {1, 1, 0, 0}), 0.875);

  // One class only: AUC undefined (NaN), written as null.
  auto one = gt::link_metrics({"yes", "no"}, {1, 1});
  EXPECT_TRUE(std::isnan(one.auc));
  auto j = nlohmann::json::parse(gt::metrics_json(one));
  EXPECT_EQ(j["task"], "link_prediction");
  EXPECT_TRUE(j["auc"].is_null());
  EXPECT_DOUBLE_EQ(j["accuracy"].get<double>(), 0.5);

  EXPECT_TRUE(contains(input_error_of([] { gt::link_metrics({"yes"}, {2}); }), "not 0 or 1"));
  EXPECT_TRUE(contains(input_error_of([] { gt::link_metrics({"yes"}, {}); }), "1 answers but 0 labels"));
}

TEST(Metrics, PredictionsJsonl) {
  gt::test::TempDir dir("gt_metrics");
  const std::string path = dir.file("predictions.jsonl");
  // The last answer ends inside a multi-byte character (as a cut-off generation can).
  gt::write_predictions_jsonl(path, {{"cora_test_5", 5, "Theory</s>"},
                                     {"cora_test_9", 9, "line\n\"quoted\""},
                                     {"cora_test_11", 11, std::string("caf\xC3", 4)}});
  const std::string text = gt::read_file(path);
  EXPECT_EQ(text.substr(0, text.find('\n')), R"({"id":"cora_test_5","node_idx":5,"res":"Theory</s>"})");
  std::vector<nlohmann::json> lines;
  size_t start = 0;
  for (size_t nl; (nl = text.find('\n', start)) != std::string::npos; start = nl + 1)
    lines.push_back(nlohmann::json::parse(text.substr(start, nl - start)));
  ASSERT_EQ(lines.size(), 3u);
  EXPECT_EQ(lines[1]["res"], "line\n\"quoted\"");
  EXPECT_EQ(lines[2]["node_idx"], 11);
  EXPECT_EQ(lines[2]["res"], "caf\xEF\xBF\xBD");  // U+FFFD
  EXPECT_EQ(dir.list().size(), 1u);               // no temporary file left behind
}

}  // namespace

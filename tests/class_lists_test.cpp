// Class lists by dataset: the forms people already have (GraphGPT's Cora_id_labels.json,
// OneForAll's arXiv and Cora description files, a plain list), the JSON that maps datasets to
// them, the list configs/graphgpt ships, and one-line errors.
#include <gtest/gtest.h>

#include <algorithm>
#include <string>
#include <vector>

#include "common/atomic_file.hpp"
#include "data/class_lists.hpp"
#include "data/metrics.hpp"
#include "tests/assets.hpp"
#include "tests/input_error.hpp"
#include "tests/temp_dir.hpp"

namespace {

using gt::test::input_error_of;

bool contains(const std::string& s, const std::string& part) { return s.find(part) != std::string::npos; }

TEST(ClassLists, TheFilesGraphGptUsersHave) {
  GT_REQUIRE_ASSETS(assets);
  const auto arxiv = gt::read_class_list(assets + "/graph/label_desc/arxiv_CS_categories_ofa.txt");
  ASSERT_EQ(arxiv.size(), 40u);  // ogbn-arxiv's 40 CS categories; two codes recur in the text
  EXPECT_EQ(arxiv.front(), "cs.AI");
  EXPECT_EQ(arxiv.back(), "cs.SY");
  const auto cora70 = gt::read_class_list(assets + "/graph/graphgpt_cora25k/Cora_id_labels.json");
  ASSERT_EQ(cora70.size(), 70u);  // the distinct labels, "nan" (unlabelled) left out
  EXPECT_TRUE(std::is_sorted(cora70.begin(), cora70.end()));
  EXPECT_EQ(std::count(cora70.begin(), cora70.end(), "nan"), 0);
  const auto cora7 = gt::read_class_list(assets + "/graph/label_desc/cora_categories_ofa.csv");
  EXPECT_EQ(cora7, (std::vector<std::string>{"Theory", "Reinforcement_Learning", "Genetic_Algorithms", "Neural_Networks",
                                             "Probabilistic_Methods", "Case_Based", "Rule_Learning"}));
  // Cora's 70 labels nest ("artificial intelligence, machine learning" in "..., neural networks"):
  // an answer is read as its longest class.
  EXPECT_EQ(cora70[gt::parse_class("It is artificial intelligence, machine learning, neural networks.", cora70)],
            "artificial intelligence, machine learning, neural networks");
}

TEST(ClassLists, ShippedGraphGptListMatchesTheArxivCategories) {
  GT_REQUIRE_ASSETS(assets);
  const std::string src = std::getenv("GRAPHTUNE_SOURCE_DIR") ? std::getenv("GRAPHTUNE_SOURCE_DIR") : ".";
  const auto lists = gt::read_class_lists(src + "/configs/graphgpt/classes.json");
  ASSERT_EQ(lists.count("arxiv"), 1u);
  EXPECT_EQ(lists.at("arxiv"), gt::read_class_list(assets + "/graph/label_desc/arxiv_CS_categories_ofa.txt"));
  ASSERT_EQ(lists.at("pubmed").size(), 3u);
  EXPECT_EQ(lists.at("pubmed")[gt::parse_class("Diabetes Mellitus Type 2</s>", lists.at("pubmed"))],
            "Diabetes Mellitus Type 2");
}

TEST(ClassLists, JsonMapsDatasetsToListsOrFiles) {
  gt::test::TempDir dir;
  gt::write_file_atomic(dir.path + "/plain.txt", "# one a line\nalpha\n\nbeta\n");
  gt::write_file_atomic(dir.path + "/q.csv", "name,description\n\"gamma, g\",\"says \"\"hi\"\",\nover lines\"\ndelta,x\n");
  gt::write_file_atomic(dir.path + "/lists.json",
                        R"({"a": "plain.txt", "b": ["x", "y"], "c": "q.csv", "d": ["z"]})");
  const auto lists = gt::read_class_lists(dir.path + "/lists.json");
  EXPECT_EQ(lists.at("a"), (std::vector<std::string>{"alpha", "beta"}));
  EXPECT_EQ(lists.at("b"), (std::vector<std::string>{"x", "y"}));
  EXPECT_EQ(lists.at("c"), (std::vector<std::string>{"gamma, g", "delta"}));
  EXPECT_EQ(lists.size(), 4u);
}

TEST(ClassLists, BadFilesAreOneLine) {
  gt::test::TempDir dir;
  const std::string j = dir.path + "/l.json";
  gt::write_file_atomic(j, R"({"arxiv": ["cs.AI", "CS.ai."]})");
  EXPECT_TRUE(contains(input_error_of([&] { gt::read_class_lists(j); }),
                       "l.json: \"arxiv\": classes 0 and 1 are both \"cs.ai\" once normalised"));
  gt::write_file_atomic(j, R"({"arxiv": 3})");
  EXPECT_TRUE(contains(input_error_of([&] { gt::read_class_lists(j); }), "l.json: \"arxiv\": must be a list"));
  gt::write_file_atomic(j, R"({"arxiv": "missing.txt"})");
  EXPECT_TRUE(contains(input_error_of([&] { gt::read_class_lists(j); }), "missing.txt"));
  gt::write_file_atomic(j, R"({})");
  EXPECT_TRUE(contains(input_error_of([&] { gt::read_class_lists(j); }), "names no dataset"));
  gt::write_file_atomic(dir.path + "/empty.txt", "# nothing\n\n");
  EXPECT_TRUE(contains(input_error_of([&] { gt::read_class_list(dir.path + "/empty.txt"); }), "holds no class names"));
  gt::write_file_atomic(dir.path + "/ids.json", R"({"0": "nan", "1": 7})");
  EXPECT_TRUE(contains(input_error_of([&] { gt::read_class_list(dir.path + "/ids.json"); }), "the label of node 1 is not a string"));
}

}  // namespace

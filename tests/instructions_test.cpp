// GraphGPT instruction records: reading, validation (one-line errors naming file, record and
// field), skip_invalid, writing in the reference's layout, node-id checks.
#include <gtest/gtest.h>

#include <algorithm>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "common/atomic_file.hpp"
#include "data/instructions.hpp"
#include "tests/input_error.hpp"
#include "tests/temp_dir.hpp"

namespace {

using gt::test::input_error_of;

// A record as the reference ships it (one graph), with pieces to replace for bad cases.
std::string node_record(const std::string& id = "arxiv_train_7",
                        const std::string& graph =
                            R"({"node_idx": 7, "edge_index": [[1, 2, 0], [0, 0, 1]], "node_list": [7, 52, 901]})",
                        const std::string& conv =
                            R"([{"from": "human", "value": "Given a citation graph: <graph> where node 0 is the paper. Which category?"}, {"from": "gpt", "value": "cs.LG, Machine Learning"}])") {
  return R"({"id": ")" + id + R"(", "graph": )" + graph + R"(, "conversations": )" + conv + "}";
}

std::string lp_record(const std::string& id = "arxiv_test_3_LP") {
  return R"({"id": ")" + id + R"(", "graph": {"node_idx_1": 3, "edge_index_1": [[1], [0]], "node_list_1": [3, 8],)"
         R"( "node_idx_2": 11, "edge_index_2": [[1, 2], [0, 0]], "node_list_2": [11, 4, 5]},)"
         R"( "conversations": [{"from": "human", "value": "First: <graph>. Second: <graph>. Connected?"},)"
         R"( {"from": "gpt", "value": "yes"}]})";
}

std::string list_of(const std::vector<std::string>& recs) {
  std::string s = "[";
  for (size_t i = 0; i < recs.size(); ++i) s += (i ? ",\n" : "\n") + recs[i];
  return s + "\n]\n";
}

void expect_one_line_with(const std::string& msg, const std::vector<std::string>& parts) {
  EXPECT_EQ(msg.find('\n'), std::string::npos) << msg;
  for (const auto& p : parts) EXPECT_NE(msg.find(p), std::string::npos) << "missing '" << p << "' in: " << msg;
}

TEST(Instructions, ReadsTheReferenceLayout) {
  gt::test::TempDir dir;
  const std::string path = dir.write("s2.json", list_of({node_record(), lp_record()}));
  gt::InstructionReadReport rep;
  auto recs = gt::read_instructions(path, {}, &rep);
  ASSERT_EQ(recs.size(), 2u);
  EXPECT_EQ(rep.total, 2);
  EXPECT_EQ(rep.skipped, 0);
  EXPECT_EQ(recs[0].id, "arxiv_train_7");
  EXPECT_EQ(recs[0].dataset, "arxiv");
  ASSERT_EQ(recs[0].graphs.size(), 1u);
  EXPECT_EQ(recs[0].graphs[0].node_idx, 7);
  EXPECT_EQ(recs[0].graphs[0].node_list, (std::vector<int64_t>{7, 52, 901}));
  EXPECT_EQ(recs[0].graphs[0].edge_index[0], (std::vector<int64_t>{1, 2, 0}));
  EXPECT_EQ(recs[0].graphs[0].edge_index[1], (std::vector<int64_t>{0, 0, 1}));
  ASSERT_EQ(recs[0].conversations.size(), 2u);
  EXPECT_EQ(recs[0].conversations[0].from, "human");
  EXPECT_EQ(recs[0].conversations[1].value, "cs.LG, Machine Learning");
  ASSERT_EQ(recs[1].graphs.size(), 2u);
  EXPECT_EQ(recs[1].dataset, "arxiv");
  EXPECT_EQ(recs[1].graphs[0].node_list, (std::vector<int64_t>{3, 8}));
  EXPECT_EQ(recs[1].graphs[1].node_idx, 11);
  EXPECT_EQ(recs[1].graphs[1].edge_index[0], (std::vector<int64_t>{1, 2}));
}

TEST(Instructions, IdHelpers) {
  EXPECT_EQ(gt::dataset_of_id("pubmed_test_12"), "pubmed");
  EXPECT_EQ(gt::dataset_of_id("cora"), "cora");
  EXPECT_TRUE(gt::is_link_prediction_id("arxiv_3_LP"));
  EXPECT_FALSE(gt::is_link_prediction_id("arxiv_LP_3"));
  EXPECT_FALSE(gt::is_link_prediction_id("arxiv_3_lp"));
}

TEST(Instructions, WriteReadRoundTripInTheReferenceLayout) {
  gt::test::TempDir dir;
  auto recs = gt::read_instructions(dir.write("in.json", list_of({node_record(), lp_record()})));
  recs[0].conversations.push_back({"human", "And why? \"quoted\" \\ \xc3\xa9"});
  recs[0].conversations.push_back({"gpt", "Because.\nNew line."});
  const std::string out = dir.file("out.json");
  gt::write_instructions(out, recs);
  EXPECT_EQ(dir.list(), (std::vector<std::string>{"in.json", "out.json"}));  // no temporary left
  auto back = gt::read_instructions(out);
  ASSERT_EQ(back.size(), recs.size());
  for (size_t i = 0; i < recs.size(); ++i) {
    EXPECT_EQ(back[i].id, recs[i].id);
    EXPECT_EQ(back[i].dataset, recs[i].dataset);
    ASSERT_EQ(back[i].graphs.size(), recs[i].graphs.size());
    for (size_t k = 0; k < recs[i].graphs.size(); ++k) {
      EXPECT_EQ(back[i].graphs[k].node_idx, recs[i].graphs[k].node_idx);
      EXPECT_EQ(back[i].graphs[k].node_list, recs[i].graphs[k].node_list);
      EXPECT_EQ(back[i].graphs[k].edge_index, recs[i].graphs[k].edge_index);
    }
    ASSERT_EQ(back[i].conversations.size(), recs[i].conversations.size());
    for (size_t t = 0; t < recs[i].conversations.size(); ++t) {
      EXPECT_EQ(back[i].conversations[t].from, recs[i].conversations[t].from);
      EXPECT_EQ(back[i].conversations[t].value, recs[i].conversations[t].value);
    }
  }
  // The reference's key names and order, one record per line.
  const std::string text = gt::read_file(out);
  EXPECT_EQ(text.rfind("[\n{\"id\":\"arxiv_train_7\",\"graph\":{\"node_idx\":7,\"edge_index\":[[1,2,0],[0,0,1]],"
                       "\"node_list\":[7,52,901]},\"conversations\":[{\"from\":\"human\",\"value\":",
                       0),
            0u)
      << text;
  EXPECT_NE(text.find("{\"id\":\"arxiv_test_3_LP\",\"graph\":{\"node_idx_1\":3,\"edge_index_1\":[[1],[0]],"
                      "\"node_list_1\":[3,8],\"node_idx_2\":11,\"edge_index_2\":[[1,2],[0,0]],"
                      "\"node_list_2\":[11,4,5]},\"conversations\":"),
            std::string::npos)
      << text;
  EXPECT_EQ(std::count(text.begin(), text.end(), '\n'), 4);
}

struct BadCase {
  const char* name;
  std::string file;
  std::vector<std::string> parts;  // besides the path
};

TEST(Instructions, EveryBadInputIsOneLineNamingFileRecordAndField) {
  const std::string conv_ok =
      R"([{"from": "human", "value": "<graph> ?"}, {"from": "gpt", "value": "a"}])";
  const std::vector<BadCase> cases = {
      {"edge outside node_list",
       list_of({node_record("arxiv_1", R"({"node_idx": 7, "edge_index": [[0, 3], [1, 0]], "node_list": [7, 8, 9]})")}),
       {"record 0", "\"arxiv_1\"", "graph.edge_index[0][1]", "3 is outside node_list", "local positions"}},
      {"negative edge entry",
       list_of({node_record("arxiv_1", R"({"node_idx": 7, "edge_index": [[0], [-1]], "node_list": [7, 8]})")}),
       {"\"arxiv_1\"", "graph.edge_index[1][0]", "outside node_list"}},
      {"edge rows differ",
       list_of({node_record("arxiv_1", R"({"node_idx": 7, "edge_index": [[0, 1], [1]], "node_list": [7, 8]})")}),
       {"\"arxiv_1\"", "graph.edge_index", "rows differ in length"}},
      {"edge_index not two rows",
       list_of({node_record("arxiv_1", R"({"node_idx": 7, "edge_index": [[0, 1]], "node_list": [7, 8]})")}),
       {"\"arxiv_1\"", "graph.edge_index", "two lists"}},
      {"centre not first",
       list_of({node_record("arxiv_1", R"({"node_idx": 8, "edge_index": [[0], [1]], "node_list": [7, 8]})")}),
       {"\"arxiv_1\"", "graph.node_idx", "8 is not node_list[0] (7)"}},
      {"empty node_list",
       list_of({node_record("arxiv_1", R"({"node_idx": 8, "edge_index": [[], []], "node_list": []})")}),
       {"\"arxiv_1\"", "graph.node_list", "is empty"}},
      {"no gpt turn",
       list_of({node_record("arxiv_1", R"({"node_idx": 7, "edge_index": [[], []], "node_list": [7]})",
                            R"([{"from": "human", "value": "<graph> ?"}])")}),
       {"\"arxiv_1\"", "conversations", "no gpt turn"}},
      {"starts with gpt",
       list_of({node_record("arxiv_1", R"({"node_idx": 7, "edge_index": [[], []], "node_list": [7]})",
                            R"([{"from": "gpt", "value": "x"}, {"from": "human", "value": "<graph>"}])")}),
       {"\"arxiv_1\"", "conversations[0].from", "\"human\" is due"}},
      {"not alternating",
       list_of({node_record("arxiv_1", R"({"node_idx": 7, "edge_index": [[], []], "node_list": [7]})",
                            R"([{"from": "human", "value": "<graph>"}, {"from": "human", "value": "again"}, {"from": "gpt", "value": "x"}])")}),
       {"\"arxiv_1\"", "conversations[1].from", "\"gpt\" is due"}},
      {"unknown role",
       list_of({node_record("arxiv_1", R"({"node_idx": 7, "edge_index": [[], []], "node_list": [7]})",
                            R"([{"from": "user", "value": "<graph>"}, {"from": "gpt", "value": "x"}])")}),
       {"\"arxiv_1\"", "conversations[0].from", "neither"}},
      {"no marker",
       list_of({node_record("arxiv_1", R"({"node_idx": 7, "edge_index": [[], []], "node_list": [7]})",
                            R"([{"from": "human", "value": "no graph here"}, {"from": "gpt", "value": "x"}])")}),
       {"\"arxiv_1\"", "conversations", "0 <graph> markers", "1 graph"}},
      {"two markers, one graph",
       list_of({node_record("arxiv_1", R"({"node_idx": 7, "edge_index": [[], []], "node_list": [7]})",
                            R"([{"from": "human", "value": "<graph><graph>"}, {"from": "gpt", "value": "x"}])")}),
       {"\"arxiv_1\"", "2 <graph> markers"}},
      {"LP with one marker",
       list_of({R"({"id": "arxiv_2_LP", "graph": {"node_idx_1": 3, "edge_index_1": [[], []], "node_list_1": [3],)"
                R"( "node_idx_2": 4, "edge_index_2": [[], []], "node_list_2": [4]},)"
                R"( "conversations": [{"from": "human", "value": "<graph>?"}, {"from": "gpt", "value": "no"}]})"}),
       {"\"arxiv_2_LP\"", "1 <graph> markers", "2 graphs"}},
      {"LP missing second graph",
       list_of({R"({"id": "arxiv_2_LP", "graph": {"node_idx_1": 3, "edge_index_1": [[], []], "node_list_1": [3]},)"
                R"( "conversations": [{"from": "human", "value": "<graph> <graph>"}, {"from": "gpt", "value": "no"}]})"}),
       {"\"arxiv_2_LP\"", "graph.node_idx_2", "missing"}},
      {"LP bad edge in second graph",
       list_of({R"({"id": "arxiv_2_LP", "graph": {"node_idx_1": 3, "edge_index_1": [[], []], "node_list_1": [3],)"
                R"( "node_idx_2": 4, "edge_index_2": [[1], [0]], "node_list_2": [4]},)"
                R"( "conversations": [{"from": "human", "value": "<graph> <graph>"}, {"from": "gpt", "value": "no"}]})"}),
       {"\"arxiv_2_LP\"", "graph.edge_index_2[0][0]", "outside node_list_2"}},
      {"marker in gpt turn",
       list_of({node_record("arxiv_1", R"({"node_idx": 7, "edge_index": [[], []], "node_list": [7]})",
                            R"([{"from": "human", "value": "<graph>"}, {"from": "gpt", "value": "see <graph>"}])")}),
       {"\"arxiv_1\"", "conversations[1].value", "gpt turn holds a <graph>"}},
      {"reserved </s> in a turn",
       list_of({node_record("arxiv_1", R"({"node_idx": 7, "edge_index": [[], []], "node_list": [7]})",
                            R"([{"from": "human", "value": "<graph>"}, {"from": "gpt", "value": "a</s>b"}])")}),
       {"\"arxiv_1\"", "conversations[1].value", "reserved text \"</s>\""}},
      {"reserved <g_patch> in a turn",
       list_of({node_record("arxiv_1", R"({"node_idx": 7, "edge_index": [[], []], "node_list": [7]})",
                            R"([{"from": "human", "value": "<graph><g_patch>"}, {"from": "gpt", "value": "a"}])")}),
       {"\"arxiv_1\"", "conversations[0].value", "<g_patch>"}},
      {"reserved text once the marker is removed",
       list_of({node_record("arxiv_1", R"({"node_idx": 7, "edge_index": [[], []], "node_list": [7]})",
                            R"([{"from": "human", "value": "a </<graph>s> b"}, {"from": "gpt", "value": "a"}])")}),
       {"\"arxiv_1\"", "conversations[0].value", "reserved text \"</s>\" once its <graph> markers are removed"}},
      {"empty value",
       list_of({node_record("arxiv_1", R"({"node_idx": 7, "edge_index": [[], []], "node_list": [7]})",
                            R"([{"from": "human", "value": "<graph>"}, {"from": "gpt", "value": ""}])")}),
       {"\"arxiv_1\"", "conversations[1].value", "is empty"}},
      {"duplicate id", list_of({node_record("arxiv_1"), node_record("arxiv_2"), node_record("arxiv_1")}),
       {"record 2", "\"arxiv_1\"", "id", "duplicate of record 0"}},
      {"empty file", "", {"the file is empty"}},
      {"blank file", " \n\t\n", {"the file is empty"}},
      {"not JSON", "[{\"id\": \"arxiv_1\",", {"not valid JSON"}},
      {"not a list", node_record(), {"top level must be a list", "an object"}},
      {"empty list", "[]", {"no instruction records"}},
      {"record not an object", "[[1, 2]]", {"record 0", "must be an object"}},
      {"missing id", "[{\"graph\": {}, \"conversations\": []}]", {"record 0: id: missing"}},
      {"missing graph", list_of({R"({"id": "arxiv_1", "conversations": )" + conv_ok + "}"}),
       {"\"arxiv_1\"", "graph: missing"}},
      {"missing node_list",
       list_of({node_record("arxiv_1", R"({"node_idx": 7, "edge_index": [[], []]})")}),
       {"\"arxiv_1\"", "graph.node_list: missing"}},
      {"missing conversations",
       list_of({R"({"id": "arxiv_1", "graph": {"node_idx": 7, "edge_index": [[], []], "node_list": [7]}})"}),
       {"\"arxiv_1\"", "conversations: missing"}},
      {"missing from",
       list_of({node_record("arxiv_1", R"({"node_idx": 7, "edge_index": [[], []], "node_list": [7]})",
                            R"([{"value": "<graph>"}, {"from": "gpt", "value": "a"}])")}),
       {"\"arxiv_1\"", "conversations[0].from: missing"}},
      {"id not a string", list_of({node_record("arxiv_1").replace(7, 9, "17")}),
       {"record 0", "id: must be a string, not an integer"}},
      {"node_idx a string",
       list_of({node_record("arxiv_1", R"({"node_idx": "7", "edge_index": [[], []], "node_list": [7]})")}),
       {"\"arxiv_1\"", "graph.node_idx: must be an integer, not a string"}},
      {"node_list float",
       list_of({node_record("arxiv_1", R"({"node_idx": 7, "edge_index": [[], []], "node_list": [7, 1.5]})")}),
       {"\"arxiv_1\"", "graph.node_list[1]: must be an integer, not a number"}},
      {"edge_index a string",
       list_of({node_record("arxiv_1", R"({"node_idx": 7, "edge_index": "0-1", "node_list": [7]})")}),
       {"\"arxiv_1\"", "graph.edge_index", "not a string"}},
      {"value a number",
       list_of({node_record("arxiv_1", R"({"node_idx": 7, "edge_index": [[], []], "node_list": [7]})",
                            R"([{"from": "human", "value": "<graph>"}, {"from": "gpt", "value": 3}])")}),
       {"\"arxiv_1\"", "conversations[1].value: must be a string, not an integer"}},
      {"conversations an object",
       list_of({node_record("arxiv_1", R"({"node_idx": 7, "edge_index": [[], []], "node_list": [7]})", "{}")}),
       {"\"arxiv_1\"", "conversations: must be a list, not an object"}},
  };
  gt::test::TempDir dir;
  for (const auto& c : cases) {
    SCOPED_TRACE(c.name);
    const std::string path = dir.write("bad.json", c.file);
    const std::string msg = input_error_of([&] { gt::read_instructions(path); });
    std::vector<std::string> parts = c.parts;
    parts.push_back(path + ": ");
    expect_one_line_with(msg, parts);
  }
}

TEST(Instructions, MissingFileNamesThePath) {
  const std::string msg = input_error_of([] { gt::read_instructions("/nonexistent/x.json"); });
  expect_one_line_with(msg, {"/nonexistent/x.json"});
}

TEST(Instructions, SkipInvalidDropsBadRecordsAndReportsWhy) {
  gt::test::TempDir dir;
  const std::string path = dir.write(
      "mixed.json",
      list_of({node_record("arxiv_1"),
               node_record("arxiv_2", R"({"node_idx": 7, "edge_index": [[5], [0]], "node_list": [7]})"),
               lp_record("arxiv_3_LP"), node_record("arxiv_1"), "42",
               node_record("cora_9", R"({"node_idx": 1, "edge_index": [[0], [0]], "node_list": [1]})")}));
  gt::InstructionReadOptions opt;
  opt.skip_invalid = true;
  gt::InstructionReadReport rep;
  auto recs = gt::read_instructions(path, opt, &rep);
  ASSERT_EQ(recs.size(), 3u);
  EXPECT_EQ(recs[0].id, "arxiv_1");
  EXPECT_EQ(recs[1].id, "arxiv_3_LP");
  EXPECT_EQ(recs[2].id, "cora_9");
  EXPECT_EQ(recs[2].dataset, "cora");
  EXPECT_EQ(rep.total, 6);
  EXPECT_EQ(rep.skipped, 3);
  ASSERT_EQ(rep.first_reasons.size(), 3u);
  expect_one_line_with(rep.first_reasons[0], {path, "record 1", "\"arxiv_2\"", "graph.edge_index[0][0]"});
  expect_one_line_with(rep.first_reasons[1], {path, "record 3", "duplicate of record 0"});
  expect_one_line_with(rep.first_reasons[2], {path, "record 4", "must be an object"});

  opt.max_reasons = 1;
  recs = gt::read_instructions(path, opt, &rep);
  EXPECT_EQ(recs.size(), 3u);
  EXPECT_EQ(rep.skipped, 3);
  EXPECT_EQ(rep.first_reasons.size(), 1u);

  // Without skip_invalid the first bad record fails the read.
  expect_one_line_with(input_error_of([&] { gt::read_instructions(path); }), {path, "record 1", "\"arxiv_2\""});

  // Nothing valid left: a file-level error that still says why.
  const std::string none = dir.write("none.json", list_of({"1", "2"}));
  expect_one_line_with(input_error_of([&] { gt::read_instructions(none, opt, &rep); }),
                       {none, "no valid instruction record", "2 skipped", "record 0"});
}

TEST(Instructions, WriteRefusesInvalidRecordsAndLeavesNothing) {
  gt::test::TempDir dir;
  auto recs = gt::read_instructions(dir.write("in.json", list_of({node_record("arxiv_1"), lp_record()})));
  auto bad = recs;
  bad[1].graphs.pop_back();  // an _LP record with one graph
  const std::string out = dir.file("out.json");
  expect_one_line_with(input_error_of([&] { gt::write_instructions(out, bad); }),
                       {out, "record 1", "\"arxiv_test_3_LP\"", "graph", "1 graphs"});
  bad = recs;
  bad[1].id = "arxiv_1";
  bad[1].dataset = "arxiv";
  bad[1].graphs.pop_back();
  bad[1].conversations[0].value = "<graph>";
  expect_one_line_with(input_error_of([&] { gt::write_instructions(out, bad); }),
                       {out, "record 1", "duplicate of record 0"});
  bad = recs;
  bad[0].dataset = "cora";
  expect_one_line_with(input_error_of([&] { gt::write_instructions(out, bad); }),
                       {out, "record 0", "dataset", "\"cora\""});
  EXPECT_EQ(dir.list(), std::vector<std::string>{"in.json"});
}

TEST(Instructions, ValidateInstructionNamesTheIdWithoutAnIndex) {
  gt::test::TempDir dir;
  auto recs = gt::read_instructions(dir.write("in.json", list_of({node_record("arxiv_1")})));
  recs[0].graphs[0].edge_index[1].push_back(0);
  expect_one_line_with(input_error_of([&] { gt::validate_instruction(recs[0], "batch"); }),
                       {"batch: record id \"arxiv_1\": graph.edge_index: rows differ"});
}

TEST(Instructions, CheckNodeIdsAgainstTheFeatureTable) {
  gt::test::TempDir dir;
  auto recs = gt::read_instructions(dir.write("in.json", list_of({node_record(), lp_record()})));
  gt::check_node_ids(recs[0], 902, "arxiv features");
  gt::check_node_ids(recs[1], 12, "arxiv features");
  expect_one_line_with(input_error_of([&] { gt::check_node_ids(recs[0], 901, "graph_data.pt"); }),
                       {"graph_data.pt: ", "\"arxiv_train_7\"", "graph.node_list[2]", "901",
                        "feature table", "\"arxiv\"", "901 nodes"});
  expect_one_line_with(input_error_of([&] { gt::check_node_ids(recs[1], 11, "graph_data.pt"); }),
                       {"graph_data.pt: ", "\"arxiv_test_3_LP\"", "graph.node_idx_2", "11"});
  expect_one_line_with(input_error_of([&] { gt::check_node_ids(recs[0], 7, "graph_data.pt"); }),
                       {"graph.node_idx:"});
}

}  // namespace

// Found by tests/fuzz/instructions_fuzz.cpp: nlohmann throws out_of_range (not parse_error) for a
// number beyond a double, which escaped read_instructions as an internal error.
TEST(Instructions, ANumberBeyondADoubleIsAnInputError) {
  const std::string text =
      list_of({node_record("arxiv_1", R"({"node_idx": 7, "edge_index": [[1e400], [0]], "node_list": [7]})")});
  expect_one_line_with(input_error_of([&] { gt::read_instructions_text(text, "big.json"); }),
                       {"big.json", "not valid JSON", "too large"});
}

TEST(Instructions, TextAndFileReadTheSame) {
  gt::test::TempDir dir("gt_instructions_text");
  const std::string text = list_of({node_record(), lp_record()});
  const auto from_file = gt::read_instructions(dir.write("r.json", text));
  const auto from_text = gt::read_instructions_text(text, "r.json");
  ASSERT_EQ(from_file.size(), 2u);
  ASSERT_EQ(from_text.size(), 2u);
  EXPECT_EQ(from_text[1].id, from_file[1].id);
  EXPECT_EQ(from_text[1].graphs[1].node_list, from_file[1].graphs[1].node_list);
}

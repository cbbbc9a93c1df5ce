// The work of an evaluation: batches cut in generation order whatever the layout, their share over
// the replicas (each batch once, the costliest first to the least loaded), and the committed
// answers a resumed eval starts from (whole files only, the manifest's fingerprint compared entry
// by entry).
#include <gtest/gtest.h>

#include <algorithm>
#include <numeric>
#include <string>
#include <vector>

#include "eval/eval_plan.hpp"
#include "eval/eval_progress.hpp"
#include "input_error.hpp"
#include "temp_dir.hpp"

namespace gt {
namespace {

TEST(EvalPlan, BatchesFollowTheGenerationOrderAndCountTheirRecords) {
  // Five records; record 3 repeats record 1's prompt (answer_of points both at run position 0).
  const std::vector<size_t> run = {1, 0, 4, 2};
  const std::vector<size_t> answer_of = {1, 0, 3, 0, 2};
  const std::vector<int64_t> lengths = {20, 10, 40, 10, 30};
  const std::vector<EvalBatch> b = plan_eval_batches(run, answer_of, lengths, 3, 8);
  ASSERT_EQ(b.size(), 2u);
  EXPECT_EQ(b[0].examples, (std::vector<size_t>{1, 0, 4}));
  EXPECT_EQ(b[1].examples, (std::vector<size_t>{2}));
  EXPECT_EQ(b[0].records, 4);  // records 0, 1, 3 and 4
  EXPECT_EQ(b[1].records, 1);
  EXPECT_EQ(b[0].cost, 3 * (30 + 8));
  EXPECT_EQ(b[1].cost, 1 * (40 + 8));
}

TEST(EvalPlan, TheOrderIsCostliestFirstWithoutTheDoneOnes) {
  std::vector<EvalBatch> batches(5);
  const int64_t costs[] = {10, 30, 20, 30, 5};
  for (size_t i = 0; i < batches.size(); ++i) batches[i].cost = costs[i];
  EXPECT_EQ(eval_batch_order(batches, {}), (std::vector<int64_t>{1, 3, 2, 0, 4}));
  EXPECT_EQ(eval_batch_order(batches, {false, true, false, false, true}), (std::vector<int64_t>{3, 2, 0}));
}

TEST(EvalProgress, CommittedBatchesRoundTripAndHalfWrittenFilesDoNotCount) {
  test::TempDir tmp("gt_eval_progress");
  const EvalProgress p(tmp.path);
  EXPECT_FALSE(p.interrupted());
  const EvalFingerprint fp = {{"[data].instructions", "sha256:aa"}, {"[eval].batch_size", "8"}};
  p.start(fp, 5);
  EXPECT_TRUE(p.interrupted());
  EXPECT_EQ(p.batches(), 5);
  p.commit(3, {{7, {1, 2, 3}}, {2, {}}});
  tmp.write("progress/batch_00000001.json.tmp.123", "{\"batch\": 1");  // a writer killed half way
  EXPECT_EQ(p.committed(5), (std::vector<bool>{false, false, false, true, false}));
  const std::vector<EvalAnswer> back = p.read(3);
  ASSERT_EQ(back.size(), 2u);
  EXPECT_EQ(back[0].example, 7u);
  EXPECT_EQ(back[0].tokens, (std::vector<int32_t>{1, 2, 3}));
  EXPECT_TRUE(back[1].tokens.empty());
  EXPECT_EQ(p.changed(fp), "");
  EXPECT_EQ(p.changed({{"[data].instructions", "sha256:bb"}, {"[eval].batch_size", "8"}}),
            "[data].instructions (its content differs)");
  EXPECT_EQ(p.changed({{"[data].instructions", "sha256:aa"}, {"[eval].batch_size", "4"}}),
            "[eval].batch_size (was \"8\", now \"4\")");
  p.start(fp, 5);  // a fresh eval: the earlier batches go
  EXPECT_EQ(p.committed(5), std::vector<bool>(5, false));
  p.remove();
  EXPECT_FALSE(p.interrupted());
}

TEST(EvalProgress, EachBatchIsClaimedOnceAnAttempt) {
  test::TempDir tmp("gt_eval_progress");
  const EvalProgress p(tmp.path);
  p.start({}, 3);
  const int64_t first = p.new_attempt();
  EXPECT_TRUE(p.claim(first, 2));
  EXPECT_FALSE(p.claim(first, 2));  // another replica got there first
  const int64_t second = p.new_attempt();  // a restart: what the dead attempt claimed is free again
  EXPECT_NE(second, first);
  EXPECT_TRUE(p.claim(second, 2));
  EXPECT_EQ(p.committed(3), std::vector<bool>(3, false));  // claims are not answers
}

TEST(EvalProgress, ABatchFileOfAnotherBatchIsNamed) {
  test::TempDir tmp("gt_eval_progress");
  const EvalProgress p(tmp.path);
  p.start({}, 2);
  tmp.write("progress/batch_00000001.json", "{\"batch\": 0, \"answers\": []}\n");
  const std::string msg = test::input_error_of([&] { p.read(1); });
  EXPECT_NE(msg.find("batch_00000001.json: holds batch 0"), std::string::npos) << msg;
}

TEST(ContentSignature, SameBytesSameSignatureOneByteMoreAnother) {
  test::TempDir tmp("gt_signature");
  const std::string a = tmp.write("a.bin", std::string(1000, 'x'));
  const std::string b = tmp.write("b.bin", std::string(1000, 'x'));
  const std::string c = tmp.write("c.bin", std::string(1001, 'x'));
  EXPECT_EQ(content_signature(a), content_signature(b));
  EXPECT_NE(content_signature(a), content_signature(c));
  EXPECT_EQ(content_signature(a).rfind("sha256:", 0), 0u);
}

}  // namespace
}  // namespace gt

// Sharded checkpoints (checkpoint/): the index's JSON and its validation, shard files written and
// read back at other boxes than they were saved as, damaged and unfinished checkpoints, the
// folder rules (committed, latest, prune) and the resharding arithmetic.
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zlib.h>

#include <fstream>
#include <functional>
#include <initializer_list>
#include <nlohmann/json.hpp>
#include <random>
#include <set>
#include <stdexcept>
#include <torch/torch.h>

#include "checkpoint/checkpoint_dir.hpp"
#include "checkpoint/index.hpp"
#include "checkpoint/slices.hpp"
#include "common/atomic_file.hpp"
#include "common/error.hpp"
#include "common/fs.hpp"
#include "tests/input_error.hpp"
#include "tests/temp_dir.hpp"
#include "weights/checkpoint_shards.hpp"
#include "weights/safetensors.hpp"

namespace {

using gt::test::input_error_of;
using gt::test::TempDir;
using nlohmann::json;
namespace ckpt = gt::ckpt;

// f throws a one-line InputError containing every one of `parts`.
void expect_error(const std::function<void()>& f, std::initializer_list<std::string> parts) {
  const std::string msg = input_error_of(f);
  for (const auto& part : parts) EXPECT_NE(msg.find(part), std::string::npos) << "wanted \"" << part << "\" in: " << msg;
  EXPECT_EQ(msg.find('\n'), std::string::npos) << msg;
}

ckpt::Chunk chunk(const std::string& file, uint64_t begin, uint64_t end, std::vector<int64_t> offset,
                  std::vector<int64_t> shape) {
  return ckpt::Chunk{file, begin, end, std::move(offset), std::move(shape)};
}

// A valid index: "model/x" (F32 4x6) split by rows over two files, a 0-d I64 and a BF16 vector.
ckpt::Index sample_index() {
  ckpt::Index index;
  index.step = 100;
  index.total_steps = 400;
  index.stage = gt::Phase::kTask;
  index.layout = {2, 1, 2, {0}};
  index.model_fingerprint = "abc123";
  index.config = {{"training.batch_size", "8"}, {"training.lr", "0.0002"}};
  index.files["rank_00000.safetensors"] = {0, 1000, 0x0000abcdu};
  index.files["rank_00001.safetensors"] = {1, 2000, 0xdeadbeefu};
  index.tensors["model/x"] = {"F32", {4, 6},
                              {chunk("rank_00000.safetensors", 200, 248, {0, 0}, {2, 6}),
                               chunk("rank_00001.safetensors", 304, 352, {2, 0}, {2, 6})}};
  index.tensors["optim/step"] = {"I64", {}, {chunk("rank_00000.safetensors", 96, 104, {}, {})}};
  index.tensors["model/e"] = {"BF16", {3}, {chunk("rank_00001.safetensors", 96, 102, {0}, {3})}};
  return index;
}

// The sample index's JSON after `edit`, parsed as "index.json".
ckpt::Index parse_edited(const std::function<void(json&)>& edit) {
  json j = json::parse(ckpt::index_to_json(sample_index()));
  edit(j);
  return ckpt::parse_index(j.dump(), "index.json");
}

void expect_rejected(const std::function<void(json&)>& edit, std::initializer_list<std::string> parts) {
  expect_error([&] { parse_edited(edit); }, parts);
}

json& x_chunk(json& j, int i) { return j["tensors"]["model/x"]["chunks"][i]; }

}  // namespace

TEST(CheckpointIndex, JsonRoundTripIsByteIdentical) {
  const std::string text = ckpt::index_to_json(sample_index());
  const ckpt::Index parsed = ckpt::parse_index(text, "index.json");
  EXPECT_EQ(ckpt::index_to_json(parsed), text);

  EXPECT_EQ(parsed.step, 100);
  EXPECT_EQ(parsed.total_steps, 400);
  EXPECT_EQ(parsed.stage, gt::Phase::kTask);
  EXPECT_TRUE(parsed.layout == (ckpt::Layout{2, 1, 2, {0}}));
  EXPECT_EQ(parsed.config.at("training.lr"), "0.0002");
  EXPECT_EQ(parsed.files.at("rank_00001.safetensors").crc32, 0xdeadbeefu);
  EXPECT_EQ(parsed.files.at("rank_00001.safetensors").bytes, 2000u);
  const auto& x = parsed.tensors.at("model/x");
  ASSERT_EQ(x.chunks.size(), 2u);
  EXPECT_EQ(x.chunks[1].begin, 304u);
  EXPECT_EQ(x.chunks[1].offset, (std::vector<int64_t>{2, 0}));
  EXPECT_TRUE(parsed.tensors.at("optim/step").shape.empty());

  const json j = json::parse(text);
  EXPECT_EQ(j["format"], "graphtune-checkpoint");
  EXPECT_EQ(j["version"], 1);
  EXPECT_EQ(j["files"]["rank_00000.safetensors"]["crc32"], "0000abcd");
  // Insertion order must not matter: the same content from a differently built map.
  ckpt::Index shuffled = sample_index();
  shuffled.tensors.clear();
  for (const char* key : {"optim/step", "model/e", "model/x"}) shuffled.tensors[key] = sample_index().tensors[key];
  EXPECT_EQ(ckpt::index_to_json(shuffled), text);
}

TEST(CheckpointIndex, LayoutStrAndDtypeSizes) {
  EXPECT_EQ((ckpt::Layout{2, 1, 1, {0}}).str(), "dp=2 pp=1 tp=1 partition=[0]");
  EXPECT_EQ((ckpt::Layout{1, 2, 1, {0, 12}}).str(), "dp=1 pp=2 tp=1 partition=[0, 12]");
  EXPECT_EQ(ckpt::dtype_size("BF16", "w"), 2);
  EXPECT_EQ(ckpt::dtype_size("I64", "w"), 8);
  EXPECT_EQ(ckpt::dtype_size("BOOL", "w"), 1);
  expect_error([] { ckpt::dtype_size("U64", "somewhere"); }, {"somewhere: ", "unknown dtype \"U64\""});
}

TEST(CheckpointIndex, RejectsEachKindOfBadField) {
  expect_rejected([](json& j) { j["version"] = 2; }, {"index.json: version: is 2"});
  expect_rejected([](json& j) { j["format"] = "other"; }, {"index.json: format: "});
  expect_rejected([](json& j) { j.erase("stage"); }, {"index.json: stage: missing"});
  expect_rejected([](json& j) { j["step"] = "3"; }, {"index.json: step: is not an integer"});
  expect_rejected([](json& j) { j["step"] = -1; }, {"index.json: step: is -1"});
  expect_rejected([](json& j) { j["layout"]["tp"] = 0; }, {"index.json: layout.tp: is 0"});
  expect_rejected([](json& j) { j["layout"]["partition"] = {0, 4}; }, {"layout.partition: has 2 entries for pp=1"});
  expect_rejected([](json& j) { j["config"]["training.lr"] = 0.1; },
                  {"index.json: config.\"training.lr\": is not a string"});
  expect_rejected([](json& j) { j["files"]["rank_00000.safetensors"]["crc32"] = 5; },
                  {"index.json: files.\"rank_00000.safetensors\".crc32: is not a string"});
  expect_rejected([](json& j) { j["files"]["rank_00000.safetensors"]["crc32"] = "xyz"; },
                  {"files.\"rank_00000.safetensors\".crc32: \"xyz\" is not 8 lowercase hex digits"});
  expect_rejected([](json& j) { j["tensors"]["model/x"]["dtype"] = "F8"; },
                  {"index.json: tensors.\"model/x\".dtype: unknown dtype \"F8\""});
  expect_rejected([](json& j) { j["tensors"]["model/x"]["shape"] = "4x6"; },
                  {"tensors.\"model/x\".shape: is not an array"});
  expect_rejected([](json& j) { x_chunk(j, 1)["offset"] = {3, 0}; },
                  {"index.json: tensors.\"model/x\".chunks[1].offset: ", "outside the tensor's shape [4, 6]"});
  expect_rejected([](json& j) { x_chunk(j, 1)["offset"] = {2}; },
                  {"tensors.\"model/x\".chunks[1].offset: [2] has 1 dimensions, the tensor 2"});
  expect_rejected([](json& j) { x_chunk(j, 1)["offset"] = {1, 0}; },
                  {"tensors.\"model/x\".chunks[1]: ", "overlaps chunks[0]"});
  expect_rejected([](json& j) { j["tensors"]["model/x"]["chunks"].erase(1); },
                  {"tensors.\"model/x\".chunks: cover 12 of the tensor's 24 elements"});
  expect_rejected([](json& j) { x_chunk(j, 0)["end"] = 240; },
                  {"tensors.\"model/x\".chunks[0].end: byte range [200, 240) does not hold the 48 bytes"});
  expect_rejected([](json& j) { x_chunk(j, 1)["begin"] = 1960; x_chunk(j, 1)["end"] = 2008; },
                  {"chunks[1].end: byte range [1960, 2008) goes beyond the 2000 bytes"});
  expect_rejected([](json& j) { x_chunk(j, 0)["file"] = "rank_00007.safetensors"; },
                  {"tensors.\"model/x\".chunks[0].file: \"rank_00007.safetensors\" is not listed in files"});
  expect_rejected([](json& j) { x_chunk(j, 0)["begin"] = -8; },
                  {"chunks[0].begin: is not a non-negative integer"});
  expect_error([] { ckpt::parse_index("{\"format\": ", "ckpt/index.json"); }, {"ckpt/index.json: not valid JSON"});
  expect_error([] { ckpt::parse_index("[1]", "index.json"); }, {"index.json: (top level): is not an object"});
}

namespace {

// Adds a shard's tensors (one chunk each) and its file entry to an index, merging the chunks
// of tensors that several ranks hold slices of.
void add_shard(ckpt::Index& index, int rank, const ckpt::WrittenShard& shard) {
  if (shard.file.bytes == 0) return;
  index.files[ckpt::shard_file_name(rank)] = shard.file;
  for (const auto& [key, entry] : shard.tensors) {
    auto [it, fresh] = index.tensors.emplace(key, entry);
    if (!fresh) it->second.chunks.insert(it->second.chunks.end(), entry.chunks.begin(), entry.chunks.end());
  }
}

uint32_t file_crc(const std::string& path) {
  const std::string bytes = gt::read_file(path);
  return uint32_t(crc32_z(crc32_z(0L, Z_NULL, 0), reinterpret_cast<const Bytef*>(bytes.data()), bytes.size()));
}

// A checkpoint of two "ranks" in root/step_00000007: "model/W" (F32 8x6) split by rows between
// them (tp=2 along dim 0); rank 0 also holds a BF16 matrix and a 0-d I64, rank 1 an odd-length
// BF16 vector (so widths mix within a file) and an I64 vector.
struct SavedCheckpoint {
  std::string folder;
  torch::Tensor W, E, step, b, count;
  std::vector<ckpt::SavedTensor> rank0, rank1;
  ckpt::WrittenShard shard0, shard1;
  ckpt::Index index;

  explicit SavedCheckpoint(const std::string& root) {
    folder = gt::join_path(root, ckpt::step_folder_name(7));
    gt::make_dirs(folder);
    torch::manual_seed(7);
    W = torch::randn({8, 6});
    E = torch::randn({5, 3}).to(torch::kBFloat16);
    step = torch::tensor(int64_t(123456789012));
    b = torch::randn({3}).to(torch::kBFloat16);
    count = torch::arange(7, torch::kInt64) * 1000003;
    const ckpt::Box top = ckpt::tp_box({8, 6}, 0, 0, 2), bottom = ckpt::tp_box({8, 6}, 0, 1, 2);
    rank0 = {{"model/E", E, {5, 3}, {}},
             {"model/W", W.narrow(0, 0, 4), {8, 6}, top.offset},
             {"optim/step", step, {}, {}}};
    rank1 = {{"model/b", b, {3}, {0}},
             {"model/W", W.narrow(0, 4, 4), {8, 6}, bottom.offset},
             {"optim/count", count, {7}, {}}};
    shard0 = ckpt::write_shard(folder, 0, rank0);
    shard1 = ckpt::write_shard(folder, 1, rank1);
    index.step = 7;
    index.total_steps = 10;
    index.stage = gt::Phase::kTask;
    index.layout = {1, 1, 2, {0}};
    add_shard(index, 0, shard0);
    add_shard(index, 1, shard1);
    ckpt::commit_index(folder, index);
  }
  std::string shard(int rank) const { return gt::join_path(folder, ckpt::shard_file_name(rank)); }
};

void flip_byte(const std::string& path, long at_from_end) {
  std::fstream f(path, std::ios::in | std::ios::out | std::ios::binary);
  f.seekg(-at_from_end, std::ios::end);
  char c = 0;
  f.read(&c, 1);
  f.seekp(-at_from_end, std::ios::end);
  c = char(c ^ 0x5a);
  f.write(&c, 1);
}

}  // namespace

TEST(CheckpointShards, WriteThenReadBoxesAtOtherLayouts) {
  TempDir tmp("gt_ckpt");
  SavedCheckpoint saved(tmp.path);

  // The shard records match the files on disk, and the index parses back from disk.
  for (const auto* shard : {&saved.shard0, &saved.shard1}) {
    const std::string path = saved.shard(shard->file.rank);
    struct stat st;
    ASSERT_EQ(::stat(path.c_str(), &st), 0);
    EXPECT_EQ(uint64_t(st.st_size), shard->file.bytes);
    EXPECT_EQ(file_crc(path), shard->file.crc32);
  }
  EXPECT_FALSE(gt::path_exists(gt::join_path(saved.folder, "index.json.tmp")));
  EXPECT_EQ(ckpt::index_to_json(ckpt::read_index(saved.folder)), ckpt::index_to_json(saved.index));
  ckpt::verify_files(saved.folder, saved.index);
  ASSERT_EQ(saved.index.tensors.at("model/W").chunks.size(), 2u);

  // Byte ranges are absolute file offsets: the first float of rank 1's slice is W[4][0].
  const ckpt::Chunk& w1 = saved.index.tensors.at("model/W").chunks[1];
  EXPECT_EQ(w1.file, "rank_00001.safetensors");
  EXPECT_EQ(w1.offset, (std::vector<int64_t>{4, 0}));
  const std::string bytes1 = gt::read_file(saved.shard(1));
  float first = 0;
  std::memcpy(&first, bytes1.data() + w1.begin, 4);
  EXPECT_EQ(first, saved.W[4][0].item<float>());

  ckpt::CheckpointReader reader(saved.folder);
  EXPECT_EQ(reader.bytes_read(), 0u);  // shards untouched until read
  EXPECT_TRUE(reader.contains("model/W"));
  EXPECT_FALSE(reader.contains("model/w"));
  EXPECT_TRUE(torch::equal(reader.read("model/W"), saved.W));
  const torch::Tensor across = reader.read("model/W", ckpt::Box{{2, 1}, {4, 3}});  // rows 2..5: both chunks
  EXPECT_TRUE(torch::equal(across, saved.W.narrow(0, 2, 4).narrow(1, 1, 3)));
  for (int part = 0; part < 4; ++part)  // tp=4 along dim 0: quarters of the halves saved
    EXPECT_TRUE(torch::equal(reader.read("model/W", ckpt::tp_box({8, 6}, 0, part, 4)),
                             saved.W.narrow(0, 2 * part, 2)))
        << "part " << part;
  for (int part = 0; part < 3; ++part)  // tp=3 along dim 1: every column block spans both chunks
    EXPECT_TRUE(torch::equal(reader.read("model/W", ckpt::tp_box({8, 6}, 1, part, 3)),
                             saved.W.narrow(1, 2 * part, 2)))
        << "part " << part;
  const torch::Tensor E = reader.read("model/E");
  EXPECT_EQ(E.scalar_type(), torch::kBFloat16);
  EXPECT_TRUE(torch::equal(E, saved.E));
  EXPECT_TRUE(torch::equal(reader.read("model/E", ckpt::Box{{1, 2}, {3, 1}}), saved.E.narrow(0, 1, 3).narrow(1, 2, 1)));
  EXPECT_TRUE(torch::equal(reader.read("model/b"), saved.b));
  const torch::Tensor step = reader.read("optim/step");
  EXPECT_EQ(step.dim(), 0);
  EXPECT_EQ(step.item<int64_t>(), 123456789012);
  EXPECT_TRUE(torch::equal(reader.read("optim/count"), saved.count));
  EXPECT_EQ(reader.bytes_read(), saved.shard0.file.bytes + saved.shard1.file.bytes);  // each file checked once
  expect_error([&] { reader.read("model/nope"); }, {saved.folder + ": no tensor \"model/nope\" in this checkpoint"});

  // Each shard is a plain safetensors file: graphtune's own reader sees the saved tensors.
  for (const auto& [rank, list] : {std::make_pair(0, &saved.rank0), std::make_pair(1, &saved.rank1)}) {
    const auto loaded = gt::load_safetensors(saved.shard(rank));
    ASSERT_EQ(loaded.size(), list->size());
    for (const auto& t : *list) {
      ASSERT_TRUE(loaded.count(t.key)) << t.key;
      EXPECT_TRUE(torch::equal(loaded.at(t.key), t.data)) << t.key;
    }
  }
}

TEST(CheckpointShards, EmptyShardWritesNoFile) {
  TempDir tmp("gt_ckpt");
  const ckpt::WrittenShard shard = ckpt::write_shard(tmp.path, 3, {});
  EXPECT_EQ(shard.file.bytes, 0u);
  EXPECT_TRUE(shard.tensors.empty());
  EXPECT_TRUE(tmp.list().empty());
}

TEST(CheckpointShards, SaverBugsAreCaughtAtSaveTime) {
  TempDir tmp("gt_ckpt");
  const torch::Tensor t = torch::ones({2, 3});
  EXPECT_THROW(ckpt::write_shard(tmp.path, 0, {{"a", t, {2, 3}, {}}, {"a", t, {2, 3}, {}}}), std::logic_error);
  EXPECT_THROW(ckpt::write_shard(tmp.path, 0, {{"a", t, {3, 3}, {2, 0}}}), std::logic_error);  // past the end
  EXPECT_TRUE(tmp.list().empty());
  // An index that loading would refuse (a gap: one of two row blocks) is never committed.
  SavedCheckpoint saved(tmp.path);
  ckpt::Index partial = saved.index;
  partial.tensors["model/W"].chunks.pop_back();
  ASSERT_EQ(::unlink(gt::join_path(saved.folder, "index.json").c_str()), 0);
  expect_error([&] { ckpt::commit_index(saved.folder, partial); },
               {saved.folder + "/index.json: tensors.\"model/W\".chunks: cover 24 of the tensor's 48 elements"});
  EXPECT_TRUE(ckpt::committed_checkpoints(tmp.path).empty());
  EXPECT_FALSE(gt::path_exists(gt::join_path(saved.folder, "index.json.tmp")));
}

TEST(CheckpointShards, DamagedOrUnfinishedCheckpointsAreRefusedNamingTheFile) {
  {  // truncated
    TempDir tmp("gt_ckpt");
    SavedCheckpoint saved(tmp.path);
    const uint64_t bytes = saved.shard1.file.bytes;
    ASSERT_EQ(::truncate(saved.shard(1).c_str(), off_t(bytes - 10)), 0);
    const std::string want = "truncated: " + std::to_string(bytes - 10) + " bytes, the index records " +
                             std::to_string(bytes);
    expect_error([&] { ckpt::verify_files(saved.folder, saved.index); }, {saved.shard(1) + ": " + want});
    ckpt::CheckpointReader reader(saved.folder);
    EXPECT_TRUE(torch::equal(reader.read("model/E"), saved.E));  // rank 0's file is intact
    expect_error([&] { reader.read("model/W"); }, {saved.shard(1) + ": " + want});
  }
  {  // one byte flipped in the data
    TempDir tmp("gt_ckpt");
    SavedCheckpoint saved(tmp.path);
    flip_byte(saved.shard(0), 3);
    expect_error([&] { ckpt::verify_files(saved.folder, saved.index); },
                 {saved.shard(0) + ": checksum mismatch (corrupted)"});
    ckpt::CheckpointReader reader(saved.folder);
    EXPECT_TRUE(torch::equal(reader.read("model/b"), saved.b));
    EXPECT_NO_THROW(reader.read("model/W", ckpt::Box{{6, 0}, {2, 6}}));  // rank 1's rows only
    expect_error([&] { reader.read("model/W"); }, {saved.shard(0) + ": checksum mismatch (corrupted)"});
  }
  {  // a shard missing
    TempDir tmp("gt_ckpt");
    SavedCheckpoint saved(tmp.path);
    ASSERT_EQ(::unlink(saved.shard(1).c_str()), 0);
    expect_error([&] { ckpt::verify_files(saved.folder, saved.index); }, {saved.shard(1) + ": missing"});
    ckpt::CheckpointReader reader(saved.folder);
    expect_error([&] { reader.read("optim/count"); }, {saved.shard(1) + ": missing"});
  }
  {  // never committed: the save died before index.json
    TempDir tmp("gt_ckpt");
    SavedCheckpoint saved(tmp.path);
    ASSERT_EQ(::unlink(gt::join_path(saved.folder, "index.json").c_str()), 0);
    expect_error([&] { ckpt::CheckpointReader reader(saved.folder); },
                 {saved.folder + "/index.json: missing: not a committed checkpoint"});
    expect_error([&] { ckpt::resolve_checkpoint(tmp.path, saved.folder); },
                 {saved.folder + ": not a committed checkpoint (no index.json: the save that wrote it did not finish)"});
    expect_error([&] { ckpt::resolve_checkpoint(tmp.path, "latest"); }, {"no committed checkpoint in " + tmp.path});
    expect_error([&] { ckpt::resolve_checkpoint(tmp.path, tmp.file("step_00000099")); },
                 {tmp.file("step_00000099") + ": no such folder"});
  }
}

namespace {

// A step folder under root with one file in it, committed (with an index.json) or not.
void make_step(const std::string& root, int64_t step, bool committed) {
  const std::string folder = gt::join_path(root, ckpt::step_folder_name(step));
  gt::make_dirs(folder);
  std::ofstream(gt::join_path(folder, ckpt::shard_file_name(0))) << "shard bytes";
  if (committed) {
    ckpt::Index index;
    index.step = step;
    ckpt::commit_index(folder, index);
  }
}

}  // namespace

TEST(CheckpointFolders, CommittedLatestAndPrune) {
  EXPECT_EQ(ckpt::step_folder_name(100), "step_00000100");
  EXPECT_EQ(ckpt::shard_file_name(3), "rank_00003.safetensors");

  TempDir tmp("gt_ckpt");
  const std::string root = tmp.file("ckpts");
  EXPECT_TRUE(ckpt::committed_checkpoints(root).empty());  // missing root
  gt::make_dirs(root);
  make_step(root, 2, true);
  make_step(root, 3, false);  // a save in progress
  make_step(root, 1, true);
  make_step(root, 0, false);  // the remains of a killed save
  gt::make_dirs(gt::join_path(root, "notes"));
  gt::make_dirs(gt::join_path(root, "step_x"));
  std::ofstream(gt::join_path(gt::join_path(root, "step_x"), "index.json")) << "{}";

  const auto s = [&](int64_t step) { return gt::join_path(root, ckpt::step_folder_name(step)); };
  EXPECT_EQ(ckpt::committed_checkpoints(root), (std::vector<std::string>{s(1), s(2)}));
  EXPECT_EQ(ckpt::resolve_checkpoint(root, "latest"), s(2));
  EXPECT_EQ(ckpt::resolve_checkpoint(root, s(1) + "/"), s(1));
  EXPECT_EQ(ckpt::read_index(s(2)).step, 2);

  ckpt::prune_checkpoints(root, 1);
  EXPECT_EQ(gt::list_dir(root), (std::vector<std::string>{"notes", "step_00000002", "step_00000003", "step_x"}));
  EXPECT_EQ(gt::list_dir(s(3)), (std::vector<std::string>{"rank_00000.safetensors"}));  // untouched
  EXPECT_EQ(gt::list_dir(s(2)), (std::vector<std::string>{"index.json", "rank_00000.safetensors"}));

  // keep=2 keeps the two newest committed; an uncommitted folder between them goes.
  make_step(root, 4, true);
  make_step(root, 5, false);
  make_step(root, 6, true);
  ckpt::prune_checkpoints(root, 2);
  EXPECT_EQ(ckpt::committed_checkpoints(root), (std::vector<std::string>{s(4), s(6)}));
  EXPECT_FALSE(gt::path_exists(s(2)));
  EXPECT_FALSE(gt::path_exists(s(3)));
  EXPECT_FALSE(gt::path_exists(s(5)));
  EXPECT_EQ(ckpt::resolve_checkpoint(root, "latest"), s(6));

  // Nothing committed: nothing is known to be finished, so nothing goes.
  const std::string fresh = tmp.file("fresh");
  make_step(fresh, 1, false);
  ckpt::prune_checkpoints(fresh, 1);
  EXPECT_TRUE(gt::path_exists(gt::join_path(fresh, ckpt::step_folder_name(1))));
  EXPECT_THROW(ckpt::prune_checkpoints(root, 0), std::logic_error);
}

TEST(CheckpointSlices, PiecesCoverRandomBoxesExactlyOnce) {
  // A 7x9 tensor saved as 2x2 chunks of uneven sizes (rows cut at 3, columns at 5).
  ckpt::TensorEntry entry{"F32", {7, 9}, {}};
  const int64_t rows[] = {0, 3, 7}, cols[] = {0, 5, 9};
  for (int r = 0; r < 2; ++r)
    for (int c = 0; c < 2; ++c)
      entry.chunks.push_back(
          chunk("f", 0, 0, {rows[r], cols[c]}, {rows[r + 1] - rows[r], cols[c + 1] - cols[c]}));

  std::mt19937 rng(6);
  int pieces_total = 0;
  for (int trial = 0; trial < 300; ++trial) {
    ckpt::Box want{{0, 0}, {0, 0}};
    for (int d = 0; d < 2; ++d) {
      const int64_t extent = entry.shape[d];
      want.offset[d] = std::uniform_int_distribution<int64_t>(0, extent - 1)(rng);
      want.shape[d] = std::uniform_int_distribution<int64_t>(1, extent - want.offset[d])(rng);
    }
    std::vector<int> hits(size_t(want.shape[0] * want.shape[1]), 0);
    std::set<size_t> expected_chunks;  // the chunk of each wanted cell, found cell by cell
    for (int64_t i = 0; i < want.shape[0]; ++i)
      for (int64_t k = 0; k < want.shape[1]; ++k) {
        const int64_t gi = want.offset[0] + i, gk = want.offset[1] + k;
        expected_chunks.insert(size_t((gi >= 3) * 2 + (gk >= 5)));
      }
    const auto pieces = ckpt::pieces_of(entry, want);
    std::set<size_t> got_chunks;
    size_t previous = 0;
    for (const auto& p : pieces) {
      EXPECT_TRUE(got_chunks.empty() || p.chunk > previous);  // chunk order
      previous = p.chunk;
      got_chunks.insert(p.chunk);
      const auto& c = entry.chunks[p.chunk];
      for (int d = 0; d < 2; ++d) {
        EXPECT_EQ(p.global.offset[d], c.offset[d] + p.in_chunk[d]);
        EXPECT_EQ(p.global.offset[d], want.offset[d] + p.in_want[d]);
        EXPECT_GT(p.global.shape[d], 0);
        EXPECT_LE(p.in_chunk[d] + p.global.shape[d], c.shape[d]);
      }
      for (int64_t i = 0; i < p.global.shape[0]; ++i)
        for (int64_t k = 0; k < p.global.shape[1]; ++k) {
          const int64_t wi = p.in_want[0] + i, wk = p.in_want[1] + k;
          ASSERT_TRUE(wi >= 0 && wi < want.shape[0] && wk >= 0 && wk < want.shape[1]);
          ++hits[size_t(wi * want.shape[1] + wk)];
        }
    }
    EXPECT_EQ(got_chunks, expected_chunks) << "trial " << trial;
    for (int h : hits) ASSERT_EQ(h, 1) << "trial " << trial;
    pieces_total += int(pieces.size());
  }
  EXPECT_GT(pieces_total, 300);  // the random boxes did cross chunk borders

  EXPECT_THROW(ckpt::pieces_of(entry, ckpt::Box{{5, 0}, {3, 1}}), std::logic_error);
  EXPECT_THROW(ckpt::pieces_of(entry, ckpt::Box{{0}, {1}}), std::logic_error);
  const ckpt::TensorEntry scalar{"I64", {}, {chunk("f", 0, 8, {}, {})}};
  EXPECT_EQ(ckpt::pieces_of(scalar, ckpt::Box{}).size(), 1u);
}

TEST(CheckpointSlices, TpBox) {
  const ckpt::Box q = ckpt::tp_box({8, 6}, 0, 1, 4);
  EXPECT_EQ(q.offset, (std::vector<int64_t>{2, 0}));
  EXPECT_EQ(q.shape, (std::vector<int64_t>{2, 6}));
  const ckpt::Box c = ckpt::tp_box({8, 6}, 1, 2, 3);
  EXPECT_EQ(c.offset, (std::vector<int64_t>{0, 4}));
  EXPECT_EQ(c.shape, (std::vector<int64_t>{8, 2}));
  const ckpt::Box whole = ckpt::tp_box({8, 6}, -1, 0, 4);
  EXPECT_EQ(whole.offset, (std::vector<int64_t>{0, 0}));
  EXPECT_EQ(whole.shape, (std::vector<int64_t>{8, 6}));
  EXPECT_THROW(ckpt::tp_box({8, 6}, 1, 0, 4), std::logic_error);  // 6 columns in 4 parts
  EXPECT_THROW(ckpt::tp_box({8, 6}, 2, 0, 2), std::logic_error);
  EXPECT_THROW(ckpt::tp_box({8, 6}, 0, 4, 4), std::logic_error);
}

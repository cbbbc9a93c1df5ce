// safetensors reader/writer: bit-exact round trips, the Python package's exact layout, and a
// one-line InputError naming the file and the problem for each kind of damaged file.
#include <gtest/gtest.h>
#include <torch/torch.h>

#include <cstdlib>
#include <cstring>
#include <fstream>

#include "common/atomic_file.hpp"
#include "common/error.hpp"
#include "common/fs.hpp"
#include "tests/temp_dir.hpp"
#include "weights/safetensors.hpp"

namespace {

using gt::test::TempDir;

bool same_bytes(const torch::Tensor& a, const torch::Tensor& b) {
  if (a.scalar_type() != b.scalar_type() || a.sizes() != b.sizes()) return false;
  auto ca = a.contiguous(), cb = b.contiguous();
  // An empty tensor's data pointer may be null, which memcmp must not get (UBSan, scripts/sanitize.sh).
  return ca.nbytes() == 0 || std::memcmp(ca.data_ptr(), cb.data_ptr(), ca.nbytes()) == 0;
}

// A file from raw parts: the 8-byte length, the header text, then the data bytes.
void write_raw(const std::string& path, const std::string& header, const std::string& data,
               uint64_t claimed_len = UINT64_MAX) {
  uint64_t n = claimed_len == UINT64_MAX ? header.size() : claimed_len;
  std::ofstream out(path, std::ios::binary);
  out.write(reinterpret_cast<const char*>(&n), 8);
  out << header << data;
}

// Expects open() to throw an InputError whose one-line message names the file and contains want.
void expect_bad(const std::string& path, const std::string& want) {
  try {
    gt::SafetensorsFile::open(path);
    ADD_FAILURE() << "no error for " << path << " (wanted: " << want << ")";
  } catch (const gt::InputError& e) {
    std::string msg = e.what();
    EXPECT_NE(msg.find(path), std::string::npos) << msg;
    EXPECT_NE(msg.find(want), std::string::npos) << msg;
    EXPECT_EQ(msg.find('\n'), std::string::npos) << msg;
  }
}

}  // namespace

TEST(Safetensors, RoundTripIsBitExact) {
  TempDir dir;
  torch::manual_seed(0);
  auto f32 = torch::randn({3, 5});
  f32[0][0] = std::numeric_limits<float>::quiet_NaN();
  f32[0][1] = -std::numeric_limits<float>::infinity();
  f32[0][2] = std::numeric_limits<float>::denorm_min();
  f32[0][3] = -0.0f;
  std::vector<std::pair<std::string, torch::Tensor>> in = {
      {"f32", f32},
      {"bf16", torch::randn({4, 2}).to(torch::kBFloat16)},
      {"f16", torch::randn({7}).to(torch::kFloat16)},
      {"f64", torch::randn({2, 2}, torch::kFloat64)},
      {"i64", torch::tensor({INT64_MIN, int64_t(-1), int64_t(0), INT64_MAX})},
      {"i32", torch::tensor({-5, 6}, torch::kInt32)},
      {"i8", torch::tensor({-128, 127}, torch::kInt8)},
      {"u8", torch::tensor({0, 255}, torch::kUInt8)},
      {"bool", torch::tensor({true, false, true})},
      {"scalar", torch::tensor(3.25)},              // 0-d
      {"empty", torch::zeros({0, 4})},              // no bytes at all
      {"transposed", torch::randn({3, 4}).t()},     // non-contiguous input
  };
  std::map<std::string, std::string> meta = {{"format", "pt"}, {"note", "ünïcode ok"}};
  std::string path = dir.file("rt.safetensors");
  gt::save_safetensors(path, in, meta);

  auto f = gt::SafetensorsFile::open(path);
  EXPECT_EQ(f.metadata(), meta);
  EXPECT_EQ(f.names().size(), in.size());
  EXPECT_EQ(f.info("bf16").dtype, "BF16");
  EXPECT_EQ(f.info("scalar").shape, std::vector<int64_t>{});
  EXPECT_EQ(f.info("empty").shape, (std::vector<int64_t>{0, 4}));
  for (const auto& [name, t] : in) EXPECT_TRUE(same_bytes(f.get(name), t)) << name;
  EXPECT_EQ(f.get("scalar").dim(), 0);
  // No temporary file left beside the output.
  EXPECT_EQ(dir.list(), std::vector<std::string>{"rt.safetensors"});
}

TEST(Safetensors, LayoutMatchesPythonPackage) {
  // Written by safetensors 0.8.0: save_file({...zeros...}, metadata={"format": "pt"}).
  const std::string python_header =
      R"({"__metadata__":{"format":"pt"},"step":{"dtype":"I64","shape":[],"data_offsets":[0,8]},)"
      R"("a":{"dtype":"F32","shape":[1],"data_offsets":[8,12]},"w":{"dtype":"F32","shape":[2,3],)"
      R"("data_offsets":[12,36]},"b":{"dtype":"BF16","shape":[3],"data_offsets":[36,42]},)"
      R"("h":{"dtype":"F16","shape":[0,4],"data_offsets":[42,42]},"mask":{"dtype":"BOOL","shape":[5],)"
      R"("data_offsets":[42,47]}})"
      "      ";
  ASSERT_EQ(python_header.size(), 376u);
  TempDir dir;
  std::string path = dir.file("p.safetensors");
  gt::save_safetensors(path,
                       {{"w", torch::zeros({2, 3})},
                        {"b", torch::zeros({3}, torch::kBFloat16)},
                        {"step", torch::tensor(int64_t(0))},
                        {"mask", torch::zeros({5}, torch::kBool)},
                        {"h", torch::zeros({0, 4}, torch::kFloat16)},
                        {"a", torch::zeros({1})}},
                       {{"format", "pt"}});
  std::string bytes = gt::read_file(path);
  uint64_t n = 376;
  std::string expected(reinterpret_cast<const char*>(&n), 8);
  expected += python_header + std::string(47, '\0');
  EXPECT_EQ(bytes, expected);
}

TEST(Safetensors, ZeroCopyTensorsOutliveTheFileObjectAndNeverWriteTheFile) {
  TempDir dir;
  std::string path = dir.file("z.safetensors");
  gt::save_safetensors(path, {{"x", torch::arange(16, torch::kFloat32)}});
  std::string before = gt::read_file(path);
  torch::Tensor x;
  {
    auto f = gt::SafetensorsFile::open(path);
    x = f.get("x");
  }
  EXPECT_TRUE(torch::equal(x, torch::arange(16, torch::kFloat32)));
  x.fill_(42.0f);  // lands in a private copy-on-write page
  EXPECT_EQ(gt::read_file(path), before);
  EXPECT_TRUE(torch::equal(gt::SafetensorsFile::open(path).get("x"), torch::arange(16, torch::kFloat32)));
}

TEST(Safetensors, MisalignedTensorsComeBackAsCopies) {
  TempDir dir;
  std::string path = dir.file("m.safetensors");
  // A 1-byte tensor first pushes the f32 to data offset 1 (legal, if unusual).
  float v[2] = {1.5f, -2.0f};
  std::string data(1, '\x07');
  data.append(reinterpret_cast<const char*>(v), 8);
  write_raw(path,
            R"({"u":{"dtype":"U8","shape":[1],"data_offsets":[0,1]},)"
            R"("f":{"dtype":"F32","shape":[2],"data_offsets":[1,9]}})",
            data);
  auto f = gt::SafetensorsFile::open(path);
  EXPECT_TRUE(torch::equal(f.get("f"), torch::tensor({1.5f, -2.0f})));
  EXPECT_EQ(f.get("u").item<uint8_t>(), 7);
}

TEST(Safetensors, WriterRejectsBadInput) {
  TempDir dir;
  std::string path = dir.file("w.safetensors");
  EXPECT_THROW(gt::save_safetensors(path, {{"a", torch::zeros({1})}, {"a", torch::zeros({1})}}), gt::InputError);
  EXPECT_THROW(gt::save_safetensors(path, {{"__metadata__", torch::zeros({1})}}), gt::InputError);
  EXPECT_THROW(gt::save_safetensors(path, {{"u", torch::Tensor()}}), gt::InputError);
  EXPECT_FALSE(gt::path_exists(path));
}

TEST(SafetensorsBadFiles, MissingOrTooShort) {
  TempDir dir;
  expect_bad(dir.file("absent.safetensors"), "cannot open");
  std::ofstream(dir.file("short.safetensors")) << "abc";
  expect_bad(dir.file("short.safetensors"), "too short for the 8-byte header length");
  expect_bad(dir.path, "not a regular file");
}

TEST(SafetensorsBadFiles, HeaderLengthLargerThanFile) {
  TempDir dir;
  std::string path = dir.file("long.safetensors");
  write_raw(path, "{}", "", 1000);
  expect_bad(path, "header length 1000 exceeds the file size (10 bytes)");
}

TEST(SafetensorsBadFiles, HeaderNotJson) {
  TempDir dir;
  write_raw(dir.file("a.safetensors"), "{\"x\": nope}", "");
  expect_bad(dir.file("a.safetensors"), "header is not valid JSON");
  write_raw(dir.file("b.safetensors"), "[1, 2]", "");
  expect_bad(dir.file("b.safetensors"), "header is not a JSON object");
  write_raw(dir.file("c.safetensors"), R"({"__metadata__":{"k":1}})", "");
  expect_bad(dir.file("c.safetensors"), "__metadata__ value for 'k' is not a string");
}

TEST(SafetensorsBadFiles, OffsetsBeyondTheData) {
  TempDir dir;
  std::string path = dir.file("beyond.safetensors");
  write_raw(path, R"({"x":{"dtype":"F32","shape":[4],"data_offsets":[0,16]}})", std::string(12, '\0'));
  expect_bad(path, "tensor 'x': data_offsets [0, 16) go beyond the data section (12 bytes)");
}

TEST(SafetensorsBadFiles, OffsetsBackwards) {
  TempDir dir;
  std::string path = dir.file("back.safetensors");
  write_raw(path, R"({"x":{"dtype":"F32","shape":[1],"data_offsets":[8,4]}})", std::string(8, '\0'));
  expect_bad(path, "tensor 'x': data_offsets [8, 4) end before they begin");
}

TEST(SafetensorsBadFiles, OverlappingOffsets) {
  TempDir dir;
  std::string path = dir.file("overlap.safetensors");
  write_raw(path,
            R"({"a":{"dtype":"F32","shape":[4],"data_offsets":[0,16]},)"
            R"("b":{"dtype":"F32","shape":[2],"data_offsets":[8,16]},)"
            R"("e":{"dtype":"F32","shape":[0],"data_offsets":[4,4]}})",
            std::string(16, '\0'));
  expect_bad(path, "tensor 'b': data_offsets [8, 16) overlap tensor 'a' [0, 16)");
}

TEST(SafetensorsBadFiles, SizeDoesNotMatchShapeAndDtype) {
  TempDir dir;
  std::string path = dir.file("size.safetensors");
  write_raw(path, R"({"x":{"dtype":"BF16","shape":[2,3],"data_offsets":[0,24]}})", std::string(24, '\0'));
  expect_bad(path, "tensor 'x': data_offsets [0, 24) hold 24 bytes but shape [2, 3] of BF16 needs 12");
  write_raw(path, R"({"x":{"dtype":"F32","shape":[4294967296,4294967296],"data_offsets":[0,4]}})",
            std::string(4, '\0'));
  expect_bad(path, "needs more than 2^64");
}

TEST(SafetensorsBadFiles, BadEntries) {
  TempDir dir;
  std::string path = dir.file("entries.safetensors");
  write_raw(path, R"({"x":{"dtype":"Q4","shape":[1],"data_offsets":[0,1]}})", std::string(1, '\0'));
  expect_bad(path, "tensor 'x': dtype 'Q4' is not supported");
  write_raw(path, R"({"x":{"dtype":"U8","shape":[-1],"data_offsets":[0,1]}})", std::string(1, '\0'));
  expect_bad(path, "tensor 'x': shape [-1] has an entry that is not a non-negative integer");
  write_raw(path, R"({"x":{"dtype":"U8","shape":[1]}})", std::string(1, '\0'));
  expect_bad(path, "tensor 'x': header entry has no 'data_offsets'");
  write_raw(path, R"({"x":{"dtype":"U8","shape":[1],"data_offsets":[0]}})", std::string(1, '\0'));
  expect_bad(path, "tensor 'x': data_offsets [0] is not a pair of non-negative integers");
}

TEST(SafetensorsBadFiles, UnknownTensorName) {
  TempDir dir;
  std::string path = dir.file("n.safetensors");
  gt::save_safetensors(path, {{"x", torch::zeros({1})}});
  auto f = gt::SafetensorsFile::open(path);
  try {
    f.get("y");
    ADD_FAILURE();
  } catch (const gt::InputError& e) {
    EXPECT_NE(std::string(e.what()).find(path + ": no tensor 'y'"), std::string::npos) << e.what();
  }
}

// The torch-free parse (formats/safetensors_header.hpp, what tests/fuzz reaches) on bytes in memory.
TEST(SafetensorsHeader, ParsesBytesAndNamesThePathGiven) {
  const std::string header = R"({"__metadata__":{"format":"pt"},"w":{"dtype":"BF16","shape":[2],"data_offsets":[0,4]}})";
  const uint64_t n = header.size();
  std::string file(reinterpret_cast<const char*>(&n), 8);
  file += header + std::string(4, '\0');
  const gt::SafetensorsHeader h = gt::parse_safetensors_header(file.data(), file.size(), "mem.safetensors");
  EXPECT_EQ(h.data_start, 8 + n);
  ASSERT_EQ(h.entries.count("w"), 1u);
  EXPECT_EQ(h.entries.at("w").shape, std::vector<int64_t>{2});
  EXPECT_EQ(h.metadata.at("format"), "pt");
  try {
    gt::parse_safetensors_header(file.data(), file.size() - 1, "mem.safetensors");
    ADD_FAILURE() << "a truncated data section was accepted";
  } catch (const gt::InputError& e) {
    EXPECT_STREQ(e.what(), "mem.safetensors: tensor 'w': data_offsets [0, 4) go beyond the data section (3 bytes)");
  }
}

// Found by tests/fuzz/safetensors_header_fuzz.cpp: a tensor name holding a newline made the
// error two lines; control characters are shown escaped.
TEST(SafetensorsHeader, ControlCharactersInNamesAreEscaped) {
  const std::string header = R"({"a\nb":{"dtype":"F32","shape":[1],"data_offsets":[0,8]}})";
  const uint64_t n = header.size();
  std::string file(reinterpret_cast<const char*>(&n), 8);
  file += header + std::string(8, '\0');
  try {
    gt::parse_safetensors_header(file.data(), file.size(), "nl.safetensors");
    ADD_FAILURE() << "a size mismatch was accepted";
  } catch (const gt::InputError& e) {
    EXPECT_STREQ(e.what(), "nl.safetensors: tensor 'a\\x0ab': data_offsets [0, 8) hold 8 bytes but shape [1] of F32 needs 4");
  }
}

// Tokenizers against pinned ids from independent sources:
//  - tok512.bin / tokenizer.bin ids come from a Python transcription of llama2.c run.c's
//    encode() (read the .bin, one token per UTF-8 character with byte fallback id = byte + 3,
//    " " token first, then merge the best-scoring adjacent pair, leftmost on ties); each is
//    cross-checked by the pieces it spells (written next to it).
//  - tokenizer.model ids come from the `sentencepiece` Python package (0.2.3).
// tests/test_sentencepiece_oracle.py compares thousands of strings the same way.
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstring>
#include <fstream>
#include <random>

#include "common/atomic_file.hpp"
#include "common/error.hpp"
#include "tests/assets.hpp"
#include "tests/input_error.hpp"
#include "tests/temp_dir.hpp"
#include "tokenizer/llama2c_tokenizer.hpp"
#include "tokenizer/sentencepiece_training.hpp"
#include "tokenizer/tokenizer.hpp"

namespace gt {
namespace {

using Ids = std::vector<int32_t>;

using test::TempDir;
using test::input_error_of;

// The InputError message of load_tokenizer(path), or "" when it loads.
std::string load_error(const std::string& path) {
  try {
    load_tokenizer(path);
  } catch (const InputError& e) {
    return e.what();
  }
  return "";
}

const std::vector<std::string> kUnicode = {
    "", " ", "a", " leading", "trailing  ", "tabs\tand\nnewlines\n", "  two  spaces  ",
    "café naïve Zürich", "日本語のテキスト", "中文 和 English", "emoji 👍🎉 👨‍👩‍👧 🇫🇷",
    "e\xcc\x81 combining", "12345678901234567890", "<s> </s> <unk> <0x41> literal",
    "Ωμέγα привет مرحبا नमस्ते", "\xc2\xa0nbsp\xe3\x80\x80ideographic space"};

TEST(Llama2cTokenizer, Tok512PinsRunCEncodings) {
  GT_REQUIRE_ASSETS(dir);
  auto tok = load_tokenizer(dir + "/llm/tok512.bin");
  EXPECT_EQ(tok->vocab_size(), 512);
  EXPECT_EQ(tok->bos_id(), 1);
  EXPECT_EQ(tok->eos_id(), 2);
  EXPECT_EQ(tok->unk_id(), 0);
  EXPECT_EQ(tok->pad_id(), 0);
  // " Once" " upon" " a" " time": the golden generation's prompt.
  EXPECT_EQ(tok->encode("Once upon a time", true, false), (Ids{1, 403, 407, 261, 378}));
  // " Lily" "'" "s" " mom" " said" "," " \"" "h" "i" "\""
  EXPECT_EQ(tok->encode("Lily's mom said, \"hi\"", false, true),
            (Ids{317, 439, 419, 357, 336, 432, 313, 415, 417, 436, 2}));
  // " " then byte fallback for 日 (E6 97 A5) and 本 (E6 9C AC): id = byte + 3.
  EXPECT_EQ(tok->encode("日本", false, false), (Ids{410, 233, 154, 168, 233, 159, 175}));
  // " " " " " t" "w" "o" " " " s" "p" "a" "ce" "s"
  EXPECT_EQ(tok->encode("  two  spaces", false, false),
            (Ids{410, 410, 259, 424, 414, 410, 262, 427, 412, 331, 419}));
  // " a" <0x09> "b" <0x0A> "c"
  EXPECT_EQ(tok->encode("a\tb\nc", false, false), (Ids{261, 12, 430, 13, 429}));
  EXPECT_EQ(tok->encode("", true, true), (Ids{1, 2}));
  EXPECT_EQ(tok->id_to_piece(403), "\xe2\x96\x81Once");  // SentencePiece spelling
  EXPECT_EQ(tok->piece_to_id("\xe2\x96\x81Once"), 403);
  EXPECT_EQ(tok->piece_to_id("<s>"), 1);
  EXPECT_EQ(tok->piece_to_id("no such piece"), -1);
  EXPECT_EQ(tok->llama2c_piece(1), "\n<s>\n");
}

// run.c's encode() as written (rescan every pair after each merge), to check that the heap
// version picks the same merges on many random strings.
Ids run_c_encode(const std::vector<std::string>& vocab, const std::vector<float>& scores,
                 const std::string& text) {
  auto lookup = [&](const std::string& s) {
    for (size_t i = 0; i < vocab.size(); ++i)
      if (vocab[i] == s) return static_cast<int32_t>(i);
    return -1;
  };
  Ids t;
  if (!text.empty()) t.push_back(lookup(" "));
  for (size_t i = 0; i < text.size();) {
    size_t j = i + 1;
    while (j < text.size() && (static_cast<unsigned char>(text[j]) & 0xC0) == 0x80 && j - i < 4) ++j;
    int32_t id = lookup(text.substr(i, j - i));
    if (id >= 0) t.push_back(id);
    else for (size_t k = i; k < j; ++k) t.push_back(static_cast<unsigned char>(text[k]) + 3);
    i = j;
  }
  while (true) {
    float best = -1e10f;
    int best_idx = -1, best_id = -1;
    for (size_t i = 0; i + 1 < t.size(); ++i) {
      int id = lookup(vocab[t[i]] + vocab[t[i + 1]]);
      if (id != -1 && scores[id] > best) {
        best = scores[id];
        best_id = id;
        best_idx = static_cast<int>(i);
      }
    }
    if (best_idx < 0) break;
    t[best_idx] = best_id;
    t.erase(t.begin() + best_idx + 1);
  }
  return t;
}

TEST(Llama2cTokenizer, HeapMergeEqualsRunCLoop) {
  GT_REQUIRE_ASSETS(dir);
  const std::string path = dir + "/llm/tok512.bin";
  auto tok = load_tokenizer(path);
  std::vector<std::string> vocab;
  std::vector<float> scores;
  for (int32_t id = 0; id < tok->vocab_size(); ++id) {
    vocab.push_back(tok->llama2c_piece(id));
    scores.push_back(tok->score(id));
  }
  const std::vector<std::string> alphabet = {"a", "e", "t", "h", "o", "n", " ", " ", "s", "d",
                                             "l", "i", ",", ".", "\n", "é", "日", "👍", "Th"};
  std::mt19937 rng(7);
  for (int n = 0; n < 300; ++n) {
    std::string s;
    int len = static_cast<int>(rng() % 40);
    for (int i = 0; i < len; ++i) s += alphabet[rng() % alphabet.size()];
    ASSERT_EQ(tok->encode(s, false, false), run_c_encode(vocab, scores, s)) << "text: " << s;
  }
}

TEST(Llama2cTokenizer, MergeTiesGoLeftAndHopelessScoresNeverMerge) {
  std::vector<std::string> pieces = {"<unk>", "\n<s>\n", "\n</s>\n", "a", "b", "ab", "ba", "c",
                                     "cc"};
  std::vector<float> scores = {0, 0, 0, 0, 0, -1, -1, 0, -2e10f};
  Llama2cTokenizer tok("tiny", pieces, scores);
  // No " " piece: no dummy prefix. "ab" and "ba" tie: the leftmost pair merges first.
  EXPECT_EQ(tok.encode("aba", false, false), (Ids{5, 3}));
  EXPECT_EQ(tok.encode("bab", false, false), (Ids{6, 4}));
  // run.c only merges pieces scoring above -1e10.
  EXPECT_EQ(tok.encode("cc", false, false), (Ids{7, 7}));
  // A character that is no piece and has no <0xNN> piece becomes <unk>.
  EXPECT_EQ(tok.encode("z", false, false), (Ids{0}));
}

TEST(Llama2cTokenizer, LlamaBinMatchesSentencePieceModel) {
  GT_REQUIRE_ASSETS(dir);
  auto bin = load_tokenizer(dir + "/llm/tokenizer.bin");
  auto model = load_tokenizer(dir + "/llm/tokenizer.model");
  EXPECT_EQ(bin->vocab_size(), 32000);
  EXPECT_EQ(model->vocab_size(), 32000);
  // sentencepiece: ['▁Hello', ',', '▁world', '!']
  EXPECT_EQ(model->encode("Hello, world!", true, false), (Ids{1, 15043, 29892, 3186, 29991}));
  for (const auto& s : kUnicode) EXPECT_EQ(bin->encode(s, true, true), model->encode(s, true, true)) << s;
  for (int32_t id : {0, 1, 2, 3, 259, 15043, 29871, 31999}) {
    EXPECT_EQ(bin->id_to_piece(id), model->id_to_piece(id)) << id;
    EXPECT_EQ(bin->llama2c_piece(id), model->llama2c_piece(id)) << id;
  }
}

TEST(Tokenizer, DecodeRoundTripsUnicode) {
  GT_REQUIRE_ASSETS(dir);
  std::vector<std::unique_ptr<Tokenizer>> toks;
  toks.push_back(load_tokenizer(dir + "/llm/tok512.bin"));
  toks.push_back(load_tokenizer(dir + "/llm/tokenizer.bin"));
  toks.push_back(load_tokenizer(dir + "/llm/tokenizer.model"));
  toks.push_back(byte_tokenizer());
  for (const auto& tok : toks)
    for (const auto& s : kUnicode) {
      EXPECT_EQ(tok->decode(tok->encode(s, true, true)), s) << tok->source();
      EXPECT_EQ(tok->decode(tok->encode(s, false, false)), s) << tok->source();
    }
}

TEST(Tokenizer, DecodeFollowsSentencePieceAndDecodePieceFollowsRunC) {
  GT_REQUIRE_ASSETS(dir);
  auto tok = load_tokenizer(dir + "/llm/tokenizer.model");
  const int32_t hello = tok->piece_to_id("\xe2\x96\x81Hello"), space = 29871;
  ASSERT_EQ(hello, 15043);
  EXPECT_EQ(tok->decode({1, hello}), "Hello");          // control ids don't end the prefix
  EXPECT_EQ(tok->decode({space, hello}), " Hello");     // only the first piece loses its "▁"
  EXPECT_EQ(tok->decode({3 + 'A', hello}), "A Hello");  // a byte first: nothing to strip
  EXPECT_EQ(tok->decode({0, hello}), " \xe2\x81\x87  Hello");  // <unk> is " ⁇ "
  EXPECT_EQ(tok->decode({hello, 2, hello}), "Hello Hello");
  EXPECT_EQ(tok->decode_piece(1, hello), "Hello");  // after BOS the space goes
  EXPECT_EQ(tok->decode_piece(hello, hello), " Hello");
  EXPECT_EQ(tok->decode_piece(hello, 3 + 0x0A), "\n");
  EXPECT_EQ(tok->decode_piece(hello, 2), "\n</s>\n");  // what run.c prints for EOS
  EXPECT_TRUE(Tokenizer::is_printable_piece("\n"));
  EXPECT_TRUE(Tokenizer::is_printable_piece("a"));
  EXPECT_TRUE(Tokenizer::is_printable_piece(" Hello"));
  EXPECT_FALSE(Tokenizer::is_printable_piece(""));
  EXPECT_FALSE(Tokenizer::is_printable_piece("\x01"));
  EXPECT_FALSE(Tokenizer::is_printable_piece("\xf0"));  // a lone byte of an emoji
  EXPECT_THROW(tok->decode({32000}), InputError);
}

// A Hugging Face folder keeps its added tokens in added_tokens.json beside tokenizer.model, as
// GraphGPT's released model has its graph tokens: they load with the ids the file gives.
TEST(Tokenizer, AddedTokensJsonBesideSentencePiece) {
  GT_REQUIRE_ASSETS(assets);
  gt::test::TempDir dir;
  gt::write_file_atomic(dir.path + "/tokenizer.model", gt::read_file(assets + "/llm/tokenizer.model"));
  EXPECT_EQ(load_tokenizer(dir.path + "/tokenizer.model")->vocab_size(), 32000);
  gt::write_file_atomic(dir.path + "/added_tokens.json", R"({"<g_end>": 32002, "<g_patch>": 32000, "<g_start>": 32001})");
  auto tok = load_tokenizer(dir.path + "/tokenizer.model");
  EXPECT_EQ(tok->vocab_size(), 32003);
  EXPECT_EQ(tok->piece_to_id("<g_patch>"), 32000);
  EXPECT_EQ(tok->piece_to_id("<g_end>"), 32002);
  EXPECT_EQ(tok->encode("<g_start><g_patch><g_end>", false, false), (Ids{32001, 32000, 32002}));
  gt::write_file_atomic(dir.path + "/added_tokens.json", R"({"<g_patch>": 32001})");
  EXPECT_NE(input_error_of([&] { load_tokenizer(dir.path + "/tokenizer.model"); })
                .find("added_tokens.json: \"<g_patch>\" has id 32001, but the next id after"),
            std::string::npos);
  gt::write_file_atomic(dir.path + "/added_tokens.json", R"({"<s>": 32000})");
  EXPECT_NE(input_error_of([&] { load_tokenizer(dir.path + "/tokenizer.model"); }).find("\"<s>\" is already piece 1"),
            std::string::npos);
  gt::write_file_atomic(dir.path + "/added_tokens.json", R"({"<x>": "32000"})");
  EXPECT_NE(input_error_of([&] { load_tokenizer(dir.path + "/tokenizer.model"); }).find("the id must be an integer"),
            std::string::npos);
}

TEST(Tokenizer, SpecialTokensOnLlamaModel) {
  GT_REQUIRE_ASSETS(dir);
  for (const char* file : {"tokenizer.model", "tokenizer.bin"}) {
    SCOPED_TRACE(file);
    auto tok = load_tokenizer(dir + "/llm/" + file);
    EXPECT_EQ(tok->add_special_tokens({"<g_patch>", "<g_start>", "<g_end>"}),
              (Ids{32000, 32001, 32002}));
    EXPECT_EQ(tok->vocab_size(), 32003);
    EXPECT_EQ(tok->add_special_tokens({"<g_end>", "<s>"}), (Ids{32002, 1}));  // already there
    EXPECT_EQ(tok->vocab_size(), 32003);
    EXPECT_EQ(tok->piece_to_id("<g_start>"), 32001);
    EXPECT_EQ(tok->id_to_piece(32000), "<g_patch>");
    EXPECT_TRUE(tok->is_added_token(32000));
    EXPECT_FALSE(tok->is_added_token(1));

    EXPECT_EQ(tok->encode("<g_start><g_patch><g_end>", true, false), (Ids{1, 32001, 32000, 32002}));
    // The dummy prefix only at the very start: the text after <g_end> is encoded without
    // it (ids from sentencepiece for the first part, run.c without the " " token after).
    const std::string prompt = "Given a citation graph: <g_start><g_patch><g_end>\nwhere the 0th node";
    Ids want = {11221, 263, 274, 7018, 3983, 29901, 29871,    // ▁Given ▁a ▁c itation ▁graph : ▁
                32001, 32000, 32002,                          //
                13, 3062, 278, 29871, 29900, 386, 2943};      // <0x0A> where ▁the ▁ 0 th ▁node
    EXPECT_EQ(tok->encode(prompt, false, false), want);
    EXPECT_EQ(tok->decode(want), prompt);
    EXPECT_EQ(tok->encode("<g_patch> Where is it?", false, false),
              (Ids{32000, 6804, 338, 372, 29973}));  // ▁Where ▁is ▁it ?
    EXPECT_EQ(tok->encode("x<g_patch>x", false, false), (Ids{921, 32000, 29916}));  // ▁x, x
    EXPECT_EQ(tok->encode("<s>", false, false), (Ids{1}));  // registered above, so matched
    EXPECT_EQ(tok->decode_piece(921, 32000), "<g_patch>");
    for (const auto& s : {std::string("a <g_patch> b"), std::string(" <g_end><g_end> "),
                          std::string("<g_patch"), std::string("<<g_patch>>")})
      EXPECT_EQ(tok->decode(tok->encode(s, false, false)), s);
  }
}

TEST(Tokenizer, ByteTokenizerRoundTripAndSaveLoad) {
  auto tok = byte_tokenizer();
  EXPECT_EQ(tok->vocab_size(), 259);
  EXPECT_EQ(tok->encode("hé\n", true, true), (Ids{1, 3 + 'h', 3 + 0xC3, 3 + 0xA9, 3 + '\n', 2}));
  std::string all;
  for (int b = 0; b < 256; ++b) all += static_cast<char>(b);  // NUL and invalid UTF-8 included
  Ids ids = tok->encode(all, false, false);
  ASSERT_EQ(ids.size(), 256u);
  for (int b = 0; b < 256; ++b) EXPECT_EQ(ids[b], b + 3);
  EXPECT_EQ(tok->decode(ids), all);
  EXPECT_EQ(tok->decode_piece(1, 3 + ' '), " ");  // a byte piece, not a leading space
  EXPECT_EQ(tok->id_to_piece(3 + 0xAB), "<0xAB>");

  TempDir tmp;
  const std::string path = tmp.path + "/bytes.bin";
  save_llama2c_tokenizer(*tok, path);
  auto back = load_tokenizer(path);
  EXPECT_EQ(back->vocab_size(), 259);
  EXPECT_EQ(back->encode(all, true, false), tok->encode(all, true, false));
  EXPECT_EQ(back->encode(" hi", false, false), (Ids{3 + ' ', 3 + 'h', 3 + 'i'}));
  EXPECT_EQ(read_file(path).size(), 4u + 3 * 8 + 5 + 5 + 6 + 256 * (8 + 6));
}

TEST(Tokenizer, SaveReproducesLlama2cExports) {
  GT_REQUIRE_ASSETS(dir);
  TempDir tmp;
  // llama2.c's tokenizer.py made tokenizer.bin from tokenizer.model: we write the same bytes.
  save_llama2c_tokenizer(*load_tokenizer(dir + "/llm/tokenizer.model"), tmp.path + "/a.bin");
  EXPECT_TRUE(read_file(tmp.path + "/a.bin") == read_file(dir + "/llm/tokenizer.bin"));
  save_llama2c_tokenizer(*load_tokenizer(dir + "/llm/tok512.bin"), tmp.path + "/b.bin");
  EXPECT_TRUE(read_file(tmp.path + "/b.bin") == read_file(dir + "/llm/tok512.bin"));
  // With GraphGPT's tokens the file holds 32003 entries and loads back with them as pieces.
  auto tok = load_tokenizer(dir + "/llm/tokenizer.model");
  tok->add_special_tokens({"<g_patch>", "<g_start>", "<g_end>"});
  save_llama2c_tokenizer(*tok, tmp.path + "/c.bin");
  auto back = load_tokenizer(tmp.path + "/c.bin", 32003);
  EXPECT_EQ(back->add_special_tokens({"<g_patch>", "<g_start>", "<g_end>"}), (Ids{32000, 32001, 32002}));
}

TEST(Tokenizer, BadFilesFailWithOneLineNamingTheFile) {
  GT_REQUIRE_ASSETS(dir);
  TempDir tmp;
  const std::string bin = read_file(dir + "/llm/tok512.bin");
  const std::string model = read_file(dir + "/llm/tokenizer.model");
  auto patched_len = [&](int32_t len) {  // token 3's length field, at byte 4 + 3 * (8 + 5..6)
    std::string b = bin;
    size_t off = 4;
    for (int i = 0; i < 3; ++i) {
      int32_t l;
      std::memcpy(&l, b.data() + off + 4, 4);
      off += 8 + l;
    }
    std::memcpy(&b[off + 4], &len, 4);
    return b;
  };
  int32_t zero = 0;
  struct Case {
    std::string name, bytes, want;
  };
  const std::vector<Case> cases = {
      {"empty.bin", "", "empty file"},
      {"short.bin", "ab", "too short"},
      {"header_only.bin", std::string("\x07\0\0\0", 4), "no tokens"},
      {"cut_mid_piece.bin", bin.substr(0, bin.size() - 2), "file ends inside token 511"},
      {"cut_mid_header.bin", bin.substr(0, bin.size() - 6), "file ends inside the header of token 511"},
      {"negative.bin", patched_len(-5), "token 3 has a negative length -5"},
      {"huge.bin", patched_len(1 << 30), "more than max_token_length 7"},
      {"two_tokens.bin", bin.substr(0, 4 + 8 + 5 + 8 + 5), "only 2 tokens"},
      {"zero_header.bin", std::string(reinterpret_cast<char*>(&zero), 4) + bin.substr(4),
       "neither a SentencePiece model nor a llama2.c tokenizer"},
      {"garbage.model", "this is not a tokenizer at all\n", "neither a SentencePiece model"},
      {"half.model", model.substr(0, model.size() / 2), "neither a SentencePiece model"},
  };
  for (const auto& c : cases) {
    const std::string path = tmp.write(c.name, c.bytes);
    const std::string err = load_error(path);
    EXPECT_NE(err.find(path + ": "), std::string::npos) << c.name << ": " << err;
    EXPECT_NE(err.find(c.want), std::string::npos) << c.name << ": " << err;
    EXPECT_EQ(err.find('\n'), std::string::npos) << c.name << ": " << err;
  }
  EXPECT_NE(load_error(tmp.path + "/missing.model").find("cannot open"), std::string::npos);
  EXPECT_NE(load_error(tmp.path).find("is a folder"), std::string::npos);
  try {
    load_tokenizer(dir + "/llm/tok512.bin", 32000);
    ADD_FAILURE() << "vocab mismatch accepted";
  } catch (const InputError& e) {
    EXPECT_EQ(std::string(e.what()),
              dir + "/llm/tok512.bin: tokenizer vocab 512 does not match model vocab 32000 (a model pads its "
                    "embedding by at most 1024 rows; this is another vocabulary)");
  }
  // A model padded past its tokenizer (as Qwen2.5's is): the spare ids decode to nothing.
  auto padded = load_tokenizer(dir + "/llm/tok512.bin", 576);
  EXPECT_EQ(padded->vocab_size(), 512);
  EXPECT_TRUE(padded->is_unused_id(575));
  EXPECT_FALSE(padded->is_unused_id(576));
  EXPECT_EQ(padded->decode({300, 520, 301}), padded->decode({300, 301}));
  EXPECT_EQ(padded->decode_piece(300, 520), "");
  EXPECT_THROW(load_tokenizer(dir + "/llm/tok512.bin", 511), InputError);
}

// A tokenizer trained on the job's own texts (phase lm, tokenizer = "train"): the same texts
// give the same model bytes; it loads as an ordinary tokenizer.model with LLaMA's ids; every
// string round-trips exactly, unseen bytes included (byte fallback); frequent words become
// single pieces; a vocabulary too small or no text is one clear error.
TEST(SentencePieceTraining, DeterministicLoadableAndLossless) {
  std::vector<std::string> texts;
  const char* words[] = {"graph", "neural", "network", "citation", "paper", "topic", "learning", "database"};
  std::mt19937 rng(7);
  for (int i = 0; i < 400; ++i) {
    std::string t;
    for (int w = 0; w < 12; ++w) t += std::string(w ? " " : "") + words[rng() % 8];
    texts.push_back(t + (i % 3 == 0 ? "\nsecond line " + std::to_string(i) : ""));
  }
  const std::string a = train_sentencepiece(texts, 400, "test"), b = train_sentencepiece(texts, 400, "test");
  ASSERT_FALSE(a.empty());
  EXPECT_EQ(a, b);

  TempDir dir;
  const std::string path = dir.path + "/tokenizer.model";
  write_file_atomic(path, a);
  auto tok = load_tokenizer(path);
  EXPECT_EQ(tok->vocab_size(), 400);
  EXPECT_EQ(tok->bos_id(), 1);
  EXPECT_EQ(tok->eos_id(), 2);
  for (const std::string s : {"graph neural network", "unseen \xc3\xa9t\xc3\xa9 \xe2\x82\xac 12345 {tabs\t}", "citation\npaper"}) {
    const auto ids = tok->encode(s, false, false);
    EXPECT_EQ(tok->decode(ids), s);
  }
  EXPECT_EQ(tok->encode("citation", false, false).size(), 1u) << "a frequent word (with its space) is one piece";
  EXPECT_NE(input_error_of([&] { train_sentencepiece(texts, 100, "cfg.toml: [model].vocab_size"); })
                .find("cfg.toml: [model].vocab_size: a trained tokenizer's vocabulary must be in [300"),
            std::string::npos);
  EXPECT_NE(input_error_of([&] { train_sentencepiece({"", "\n"}, 320, "where"); }).find("where: no text"), std::string::npos);
}

}  // namespace
}  // namespace gt

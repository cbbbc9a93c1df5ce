// graphtune's side of tests/test_bpe_oracle.py: a byte-level BPE tokenizer built either from
// plain vectors (what a GGUF reader hands over: --vectors FILE.json with tokens, token_types,
// merges, bos, eos, unk, pad, pre) or from a Hugging Face tokenizer.json (--tokenizer-json).
// Then as `graphtune tokenize`: JSON lines of strings in, JSON arrays of ids out, or back with
// --decode; --info prints one JSON object (vocab size, BOS/EOS/UNK/PAD, whether BOS is put first) instead;
// --write-json VECTORS OUT writes the vectors as the tokenizer.json graphtune exports. A separate
// program (not a gtest) so that ctest lists no test that only ever skips. An InputError is one
// line on stderr and exit code 2.
#include <cstdio>
#include <iostream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "common/atomic_file.hpp"
#include "common/error.hpp"
#include "tokenizer/bpe_tokenizer.hpp"

namespace {

using nlohmann::json;

gt::BpeVocabulary read_vectors(const std::string& path) {
  json j = json::parse(gt::read_file(path));
  gt::BpeVocabulary v;
  v.tokens = j.at("tokens").get<std::vector<std::string>>();
  v.token_types = j.at("token_types").get<std::vector<int32_t>>();
  v.merges = j.at("merges").get<std::vector<std::string>>();
  v.bos = j.value("bos", -1);
  v.eos = j.value("eos", -1);
  v.unk = j.value("unk", -1);
  v.pad = j.value("pad", -1);
  v.pre = j.value("pre", "gpt2");
  return v;
}

int body(int argc, char** argv) {
  std::vector<std::string> args(argv + 1, argv + argc);
  std::unique_ptr<gt::Tokenizer> tok;
  bool decode = false, bos = false, eos = false, info = false;
  for (size_t i = 0; i < args.size(); ++i) {
    if (args[i] == "--vectors" && i + 1 < args.size()) {
      const std::string path = args[++i];
      tok = gt::make_bpe_tokenizer(path, read_vectors(path));
    } else if (args[i] == "--write-json" && i + 2 < args.size()) {  // VECTORS OUT: the vectors as tokenizer.json
      gt::write_file_atomic(args[i + 2], gt::bpe_tokenizer_json(read_vectors(args[i + 1]), args[i + 1]));
      return 0;
    }
    else if (args[i] == "--tokenizer-json" && i + 1 < args.size()) tok = gt::load_bpe_tokenizer_json(args[++i]);
    else if (args[i] == "--decode") decode = true;
    else if (args[i] == "--bos") bos = true;
    else if (args[i] == "--eos") eos = true;
    else if (args[i] == "--info") info = true;
    else gt::fail(args[i], "unknown argument");
  }
  if (!tok) gt::fail("bpe_driver", "usage: bpe_driver (--vectors FILE | --tokenizer-json FILE) [--decode] [--bos] [--eos] [--info] | --write-json VECTORS OUT");
  if (info) {
    std::cout << json{{"vocab_size", tok->vocab_size()}, {"bos", tok->bos_id()}, {"eos", tok->eos_id()},
                      {"unk", tok->unk_id()}, {"pad", tok->pad_id()}, {"adds_bos", tok->adds_bos()}}.dump() << "\n";
    return 0;
  }
  std::string line, out;
  for (size_t n = 1; std::getline(std::cin, line); ++n) {
    json v = json::parse(line);
    if (decode)  // stray bytes of a cut character become U+FFFD, as Python's decode does
      out = json(tok->decode(v.get<std::vector<int32_t>>())).dump(-1, ' ', false, json::error_handler_t::replace);
    else
      out = json(tok->encode(v.get<std::string>(), bos, eos)).dump();
    out += '\n';
    std::fwrite(out.data(), 1, out.size(), stdout);
  }
  return std::fflush(stdout) == 0 ? 0 : 1;
}

}  // namespace

int main(int argc, char** argv) { return gt::run_main("bpe_driver", body, argc, argv); }

// What every tokenizer format shares: special-token splitting, decoding, llama2.c export, and
// telling the two file formats apart.
#include "tokenizer/tokenizer.hpp"

#include <sys/stat.h>

#include <algorithm>
#include <cctype>
#include <cstring>
#include <string>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "common/atomic_file.hpp"
#include "common/error.hpp"
#include "common/fs.hpp"
#include "common/json_file.hpp"
#include "formats/model_presets.hpp"
#include "tokenizer/bpe_tokenizer.hpp"
#include "tokenizer/gguf_tokenizer.hpp"
#include "tokenizer/llama2c_tokenizer.hpp"
#include "tokenizer/sentencepiece_tokenizer.hpp"

namespace gt {

namespace {

const std::string kSpaceSymbol = "\xe2\x96\x81";  // "▁", SentencePiece's space

std::string replace_all(std::string s, const std::string& from, const std::string& to) {
  for (size_t pos = 0; (pos = s.find(from, pos)) != std::string::npos; pos += to.size())
    s.replace(pos, from.size(), to);
  return s;
}

int hex_digit(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  return -1;
}

}  // namespace

int parse_byte_piece(const std::string& piece) {
  if (piece.size() != 6 || piece.compare(0, 3, "<0x") != 0 || piece[5] != '>') return -1;
  int hi = hex_digit(piece[3]), lo = hex_digit(piece[4]);
  return hi < 0 || lo < 0 ? -1 : hi * 16 + lo;
}

int32_t Tokenizer::vocab_size() const {
  return base_vocab_size() + static_cast<int32_t>(added_.size());
}

void Tokenizer::check_id(int32_t id) const {
  if (id < 0 || id >= vocab_size())
    fail(source_, "token id " + std::to_string(id) + " is outside the vocabulary (0.." +
                      std::to_string(vocab_size() - 1) + ")");
}

int32_t Tokenizer::piece_to_id(const std::string& piece) const {
  int32_t id = base_piece_to_id(piece);
  if (id >= 0) return id;
  for (size_t i = 0; i < added_.size(); ++i)
    if (added_[i] == piece) return base_vocab_size() + static_cast<int32_t>(i);
  return -1;
}

std::string Tokenizer::id_to_piece(int32_t id) const {
  check_id(id);
  return is_added_token(id) ? added_[id - base_vocab_size()] : base_piece(id);
}

float Tokenizer::score(int32_t id) const {
  check_id(id);
  return is_added_token(id) ? 0.0f : base_score(id);
}

std::string Tokenizer::llama2c_piece(int32_t id) const {
  check_id(id);
  return is_added_token(id) ? added_[id - base_vocab_size()] : base_llama2c_piece(id);
}

// llama2.c's export (tokenizer.py): BOS/EOS become "\n<s>\n"/"\n</s>\n", "▁" becomes a space.
std::string Tokenizer::base_llama2c_piece(int32_t id) const {
  if (id == bos_) return "\n<s>\n";
  if (id == eos_) return "\n</s>\n";
  return replace_all(base_piece(id), kSpaceSymbol, " ");
}

int Tokenizer::base_byte(int32_t id) const { return parse_byte_piece(base_piece(id)); }

std::vector<int32_t> Tokenizer::add_special_tokens(const std::vector<std::string>& pieces) {
  std::vector<int32_t> ids;
  for (const auto& p : pieces) {
    if (p.empty()) fail(source_, "a special token cannot be empty");
    int32_t id = piece_to_id(p);
    if (id < 0) {
      id = vocab_size();
      added_.push_back(p);
    }
    special_ids_[p] = id;
    ids.push_back(id);
  }
  return ids;
}

std::vector<int32_t> Tokenizer::encode(const std::string& text, bool bos, bool eos) const {
  if ((bos && bos_ < 0) || (eos && eos_ < 0))
    fail(source_, std::string("the tokenizer has no ") + (bos && bos_ < 0 ? "BOS" : "EOS") + " token");
  std::vector<int32_t> out;
  if (bos) out.push_back(bos_);
  // Split at special tokens: the earliest occurrence wins, the longest on a tie (as HF's
  // trie). next[i] caches where special i next occurs, so the scan stays linear.
  std::vector<std::pair<const std::string*, int32_t>> specials;
  for (const auto& [piece, id] : special_ids_) specials.emplace_back(&piece, id);
  std::vector<size_t> next;
  for (const auto& s : specials) next.push_back(text.find(*s.first));
  size_t pos = 0;
  while (pos < text.size()) {
    size_t best = std::string::npos, best_i = 0;
    for (size_t i = 0; i < specials.size(); ++i) {
      if (next[i] != std::string::npos && next[i] < pos) next[i] = text.find(*specials[i].first, pos);
      size_t at = next[i];
      if (at == std::string::npos) continue;
      if (at < best || (at == best && specials[i].first->size() > specials[best_i].first->size())) {
        best = at;
        best_i = i;
      }
    }
    size_t end = best == std::string::npos ? text.size() : best;
    if (end > pos)
      encode_text(std::string_view(text).substr(pos, end - pos), pos == 0 && adds_dummy_prefix(),
                  out);
    if (best == std::string::npos) break;
    out.push_back(specials[best_i].second);
    pos = best + specials[best_i].first->size();
  }
  if (eos) out.push_back(eos_);
  return out;
}

std::string Tokenizer::decode(const std::vector<int32_t>& ids) const {
  std::string out;
  // SentencePiece drops the "▁" that starts the first piece (the dummy prefix). Control ids
  // before it don't count; anything else that came first (a byte, <unk>) ends the chance.
  bool at_start = adds_dummy_prefix();
  for (int32_t id : ids) {
    if (is_unused_id(id)) continue;
    check_id(id);
    if (is_added_token(id)) {
      out += added_[id - base_vocab_size()];
      at_start = false;
      continue;
    }
    append_base_text(id, at_start, out);
  }
  return out;
}

void Tokenizer::append_base_text(int32_t id, bool& at_start, std::string& out) const {
  if (id == unk_) {
    out += " \xe2\x81\x87 ";  // " ⁇ ", as SentencePiece
    at_start = false;
    return;
  }
  if (base_is_control(id)) return;
  int byte = base_byte(id);
  if (byte >= 0) {
    out += static_cast<char>(byte);
  } else {
    std::string piece = base_piece(id);
    if (at_start && piece.compare(0, kSpaceSymbol.size(), kSpaceSymbol) == 0)
      piece.erase(0, kSpaceSymbol.size());
    out += replace_all(piece, kSpaceSymbol, " ");
  }
  at_start = false;
}

std::string Tokenizer::decode_piece(int32_t prev, int32_t id) const {
  if (is_unused_id(id)) return "";
  std::string piece = llama2c_piece(id);
  // "following BOS token, sentencepiece decoder strips any leading whitespace" (run.c)
  if (strips_space_after_bos() && prev == bos_ && !piece.empty() && piece[0] == ' ')
    piece.erase(0, 1);
  int byte = parse_byte_piece(piece);
  if (byte >= 0) return std::string(1, static_cast<char>(byte));
  return piece;
}

bool Tokenizer::is_printable_piece(const std::string& piece) {
  if (piece.empty()) return false;
  if (piece.size() == 1) {
    // <cctype> in the default "C" locale, as run.c.
    unsigned char c = static_cast<unsigned char>(piece[0]);
    return std::isprint(c) || std::isspace(c);
  }
  return true;
}

namespace {

// Hugging Face keeps the tokens added to a SentencePiece tokenizer in added_tokens.json beside
// tokenizer.model (piece -> id), as GraphGPT's released model has its three graph tokens; they
// are registered here in id order, which must continue the base vocabulary without a gap.
std::unique_ptr<Tokenizer> with_added_tokens(std::unique_ptr<Tokenizer> tok, const std::string& model_path) {
  const std::string path = join_path(parent_path(model_path), "added_tokens.json");
  if (!path_exists(path)) return tok;
  std::vector<std::pair<int64_t, std::string>> by_id;
  const nlohmann::json added = read_json_object(path);
  for (const auto& [piece, id] : added.items()) {
    if (!id.is_number_integer()) fail(path, "\"" + piece + "\": the id must be an integer");
    by_id.emplace_back(id.get<int64_t>(), piece);
  }
  std::sort(by_id.begin(), by_id.end());
  for (size_t i = 0; i < by_id.size(); ++i) {
    const int64_t want = static_cast<int64_t>(tok->vocab_size()) + static_cast<int64_t>(i);
    if (by_id[i].first != want)
      fail(path, "\"" + by_id[i].second + "\" has id " + std::to_string(by_id[i].first) + ", but the next id after " +
                     model_path + "'s " + std::to_string(tok->vocab_size()) + " pieces" +
                     (i > 0 ? " and the tokens before it" : "") + " is " + std::to_string(want));
  }
  std::vector<std::string> pieces;
  for (const auto& [id, piece] : by_id) pieces.push_back(piece);
  const auto ids = tok->add_special_tokens(pieces);
  for (size_t i = 0; i < ids.size(); ++i)
    if (ids[i] != by_id[i].first)
      fail(path, "\"" + pieces[i] + "\" is already piece " + std::to_string(ids[i]) + " of " + model_path);
  return tok;
}

}  // namespace

std::unique_ptr<Tokenizer> load_tokenizer(const std::string& name) {
  if (name == "bytes") return byte_tokenizer();
  const std::string path = resolve_model_path(name, name);  // a preset ("smollm2") names its file
  struct stat st;
  if (::stat(path.c_str(), &st) == 0 && S_ISDIR(st.st_mode))
    fail(path, "is a folder, expected a tokenizer file (tokenizer.model or a llama2.c .bin)");
  // A Hugging Face tokenizer.json (byte-level BPE) is JSON text: told apart by name, as HF does.
  if (ends_with(path, ".json")) return load_bpe_tokenizer_json(path);
  std::string bytes = read_file(path);
  if (bytes.empty()) fail(path, "empty file, expected a tokenizer (tokenizer.model or a llama2.c .bin)");
  if (bytes.compare(0, 4, "GGUF") == 0) return load_gguf_tokenizer(path);  // the vocabulary in its metadata
  // A llama2.c .bin starts with int32 max_token_length, a small positive number, so its third
  // and fourth bytes are zero. A SentencePiece model starts with field 1 (a piece): 0x0A, a
  // length, then the piece's own 0x0A, so its first four bytes read as a large number.
  if (bytes.size() < 4)
    fail(path, "too short to be a tokenizer (" + std::to_string(bytes.size()) + " bytes)");
  int32_t header;
  std::memcpy(&header, bytes.data(), 4);
  if (header > 0 && header <= kLlama2cMaxTokenLength) return parse_llama2c_tokenizer(bytes, path);
  return with_added_tokens(parse_sentencepiece_tokenizer(bytes, path), path);
}

void check_tokenizer_vocab(Tokenizer& tok, int32_t model_vocab) {
  const int64_t spare = static_cast<int64_t>(model_vocab) - tok.vocab_size();
  if (spare < 0 || spare > kMaxUnusedRows)
    fail(tok.source(), "tokenizer vocab " + std::to_string(tok.vocab_size()) + " does not match model vocab " +
                           std::to_string(model_vocab) +
                           (spare > 0 ? " (a model pads its embedding by at most " + std::to_string(kMaxUnusedRows) +
                                            " rows; this is another vocabulary)"
                                      : ""));
  tok.allow_unused_ids(model_vocab);
}

std::unique_ptr<Tokenizer> load_tokenizer(const std::string& path, int32_t expected_vocab) {
  auto tok = load_tokenizer(path);
  check_tokenizer_vocab(*tok, expected_vocab);
  return tok;
}

void save_llama2c_tokenizer(const Tokenizer& tok, const std::string& path) {
  // Layout (llama2.c tokenizer.py export): int32 max_token_length, then per token float32
  // score, int32 byte length, the bytes. Little-endian, as the machines we run on.
  std::string body;
  int32_t max_len = 0;
  for (int32_t id = 0; id < tok.vocab_size(); ++id) {
    std::string piece = tok.llama2c_piece(id);
    float score = tok.score(id);
    int32_t len = static_cast<int32_t>(piece.size());
    max_len = std::max(max_len, len);
    body.append(reinterpret_cast<const char*>(&score), 4);
    body.append(reinterpret_cast<const char*>(&len), 4);
    body += piece;
  }
  AtomicFile f(path);
  f.write(&max_len, 4);
  f.write(body);
  f.commit();
}

}  // namespace gt

#include "tokenizer/llama2c_tokenizer.hpp"

#include <cstring>
#include <queue>

#include "common/error.hpp"

namespace gt {

namespace {

const std::string kSpaceSymbol = "\xe2\x96\x81";  // "▁"

std::string replace_all(std::string s, const std::string& from, const std::string& to) {
  for (size_t pos = 0; (pos = s.find(from, pos)) != std::string::npos; pos += to.size())
    s.replace(pos, from.size(), to);
  return s;
}

}  // namespace

Llama2cTokenizer::Llama2cTokenizer(std::string source, std::vector<std::string> pieces,
                                   std::vector<float> scores)
    : Tokenizer(std::move(source), /*unk=*/0, /*bos=*/1, /*eos=*/2, /*pad=*/0),
      pieces_(std::move(pieces)),
      scores_(std::move(scores)) {
  if (pieces_.size() < 3 || scores_.size() != pieces_.size())
    fail(this->source(), "a llama2.c tokenizer needs at least 3 tokens (<unk>, <s>, </s>)");
  std::fill(std::begin(byte_ids_), std::end(byte_ids_), 0);  // a missing byte piece -> <unk>
  for (int32_t id = static_cast<int32_t>(pieces_.size()) - 1; id >= 0; --id) {
    // Backwards, so that on a duplicate piece the lowest id wins (run.c's bsearch over a
    // qsorted copy picks an unspecified one; real vocabularies have no duplicates).
    raw_ids_[pieces_[id]] = id;
    sp_ids_[base_piece(id)] = id;
    int byte = parse_byte_piece(pieces_[id]);
    if (byte >= 0) byte_ids_[byte] = id;
  }
  auto space = raw_ids_.find(" ");
  if (space != raw_ids_.end()) space_id_ = space->second;
}

std::string Llama2cTokenizer::base_piece(int32_t id) const {
  if (id == bos_id() && pieces_[id] == "\n<s>\n") return "<s>";
  if (id == eos_id() && pieces_[id] == "\n</s>\n") return "</s>";
  return replace_all(pieces_[id], " ", kSpaceSymbol);
}

int32_t Llama2cTokenizer::base_piece_to_id(const std::string& piece) const {
  auto it = sp_ids_.find(piece);
  return it == sp_ids_.end() ? -1 : it->second;
}

// run.c's encode(): one token per UTF-8 character (a byte token per byte when the character
// is not a piece), then repeatedly merge the adjacent pair whose concatenation is the
// best-scoring piece, the leftmost on ties. run.c rescans all pairs after each merge (cubic);
// this keeps candidates in a heap ordered by (score, leftmost) and skips the stale ones, which
// picks the same pair at every step.
void Llama2cTokenizer::encode_text(std::string_view text, bool dummy_prefix,
                                   std::vector<int32_t>& out) const {
  if (text.empty()) return;
  struct Sym {
    int32_t id, prev, next;
    bool alive;
  };
  std::vector<Sym> syms;
  auto push = [&](int32_t id) {
    int32_t n = static_cast<int32_t>(syms.size());
    syms.push_back({id, n - 1, -1, true});
    if (n > 0) syms[n - 1].next = n;
  };
  if (dummy_prefix && space_id_ >= 0) push(space_id_);
  // run.c groups a byte with the continuation bytes (10xxxxxx) after it, at most 4 bytes.
  // (run.c stops at a NUL byte; here NUL is an ordinary byte, as in SentencePiece.)
  for (size_t i = 0; i < text.size();) {
    size_t j = i + 1;
    while (j < text.size() && (static_cast<unsigned char>(text[j]) & 0xC0) == 0x80 && j - i < 4) ++j;
    auto it = raw_ids_.find(std::string(text.substr(i, j - i)));
    if (it != raw_ids_.end()) {
      push(it->second);
    } else {
      for (size_t k = i; k < j; ++k) push(byte_ids_[static_cast<unsigned char>(text[k])]);
    }
    i = j;
  }

  struct Cand {
    float score;
    int32_t left, right, id, left_id, right_id;
  };
  auto worse = [](const Cand& a, const Cand& b) {
    return a.score < b.score || (a.score == b.score && a.left > b.left);
  };
  std::priority_queue<Cand, std::vector<Cand>, decltype(worse)> heap(worse);
  auto consider = [&](int32_t l, int32_t r) {
    if (l < 0 || r < 0) return;
    auto it = raw_ids_.find(pieces_[syms[l].id] + pieces_[syms[r].id]);
    if (it == raw_ids_.end()) return;
    float score = scores_[it->second];
    if (!(score > -1e10f)) return;  // run.c's search starts at best_score = -1e10
    heap.push({score, l, r, it->second, syms[l].id, syms[r].id});
  };
  for (int32_t i = 0; i + 1 < static_cast<int32_t>(syms.size()); ++i) consider(i, i + 1);
  while (!heap.empty()) {
    Cand c = heap.top();
    heap.pop();
    Sym& l = syms[c.left];
    Sym& r = syms[c.right];
    // Stale: a side was merged since (pieces only grow, so an id can't come back).
    if (!l.alive || !r.alive || l.next != c.right || l.id != c.left_id || r.id != c.right_id)
      continue;
    l.id = c.id;
    l.next = r.next;
    r.alive = false;
    if (l.next >= 0) syms[l.next].prev = c.left;
    consider(l.prev, c.left);
    consider(c.left, l.next);
  }
  for (int32_t i = 0; i >= 0 && i < static_cast<int32_t>(syms.size()); i = syms[i].next)
    out.push_back(syms[i].id);
}

std::unique_ptr<Tokenizer> parse_llama2c_tokenizer(const std::string& bytes,
                                                   const std::string& path) {
  const size_t size = bytes.size();
  if (size < 4)
    fail(path, "too short for a llama2.c tokenizer (" + std::to_string(size) + " bytes)");
  int32_t max_len;
  std::memcpy(&max_len, bytes.data(), 4);
  if (max_len <= 0 || max_len > kLlama2cMaxTokenLength)
    fail(path, "not a llama2.c tokenizer: max_token_length " + std::to_string(max_len) +
                   " in the header");
  // Every structural problem says "not a valid llama2.c tokenizer": the header alone can't tell
  // a tokenizer from, say, a llama2.c model file (its first int32 is dim, also small).
  auto bad = [&](const std::string& why) { fail(path, "not a valid llama2.c tokenizer: " + why); };
  std::vector<std::string> pieces;
  std::vector<float> scores;
  size_t off = 4;
  while (off < size) {
    const std::string token = "token " + std::to_string(pieces.size());
    if (size - off < 8) bad("file ends inside the header of " + token + " (truncated?)");
    float score;
    int32_t len;
    std::memcpy(&score, bytes.data() + off, 4);
    std::memcpy(&len, bytes.data() + off + 4, 4);
    off += 8;
    if (len < 0) bad(token + " has a negative length " + std::to_string(len));
    if (len > max_len)
      bad(token + " claims " + std::to_string(len) + " bytes, more than max_token_length " +
          std::to_string(max_len) + " in the header");
    if (static_cast<size_t>(len) > size - off)
      bad("file ends inside " + token + " (" + std::to_string(len) + " bytes, " +
          std::to_string(size - off) + " left): truncated?");
    pieces.emplace_back(bytes, off, len);
    scores.push_back(score);
    off += len;
  }
  if (pieces.empty()) bad("no tokens after the header");
  if (pieces.size() < 3)
    bad("only " + std::to_string(pieces.size()) + " tokens, llama2.c needs <unk>, <s>, </s>");
  return std::make_unique<Llama2cTokenizer>(path, std::move(pieces), std::move(scores));
}

std::unique_ptr<Tokenizer> byte_tokenizer() {
  std::vector<std::string> pieces = {"<unk>", "\n<s>\n", "\n</s>\n"};
  static const char hex[] = "0123456789ABCDEF";
  for (int b = 0; b < 256; ++b) pieces.push_back(std::string("<0x") + hex[b >> 4] + hex[b & 15] + ">");
  std::vector<float> scores(pieces.size(), 0.0f);
  return std::make_unique<Llama2cTokenizer>("<built-in byte tokenizer>", std::move(pieces),
                                            std::move(scores));
}

}  // namespace gt

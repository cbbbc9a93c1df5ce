#include "tokenizer/bpe_tokenizer.hpp"

#include <queue>
#include <string_view>
#include <unordered_map>
#include <utility>

#include "common/error.hpp"
#include "tokenizer/byte_level.hpp"

namespace gt {

namespace {

using MergePair = std::pair<std::string, std::string>;

class BpeTokenizer : public Tokenizer {
 public:
  void set_adds_bos(bool on) { add_bos_ = on; }
  BpeTokenizer(std::string source, std::vector<std::string> tokens, std::vector<int32_t> types,
               const std::vector<MergePair>& merges, int32_t bos, int32_t eos, int32_t unk,
               int32_t pad, const PreTokenizerSpec& pre, bool ignore_merges)
      : Tokenizer(std::move(source), unk, bos, eos, pad),
        tokens_(std::move(tokens)),
        types_(std::move(types)),
        pre_(pre, this->source()),
        ignore_merges_(ignore_merges) {
    for (size_t id = 0; id < tokens_.size(); ++id)
      ids_.emplace(tokens_[id], static_cast<int32_t>(id));  // the first of duplicates wins
    for (int b = 0; b < 256; ++b) {
      auto it = ids_.find(byte_level_encode(std::string(1, static_cast<char>(b))));
      byte_ids_[b] = it == ids_.end() ? -1 : it->second;
    }
    for (size_t rank = 0; rank < merges.size(); ++rank) {
      const auto& [left, right] = merges[rank];
      int32_t l = base_piece_to_id(left), r = base_piece_to_id(right),
              merged = base_piece_to_id(left + right);
      if (l < 0 || r < 0 || merged < 0)
        fail(this->source(), "merge " + std::to_string(rank) + " (\"" + left + " " + right +
                                 "\"): \"" + (l < 0 ? left : r < 0 ? right : left + right) +
                                 "\" is not in the vocabulary");
      merges_.emplace(pair_key(l, r), Merge{static_cast<int32_t>(rank), merged});  // first wins
    }
    // Decoded text of every id, once: byte-level characters back to bytes; special tokens
    // (and anything outside the alphabet, as tokenizers' ByteLevel decoder) as written.
    texts_.resize(tokens_.size());
    for (size_t id = 0; id < tokens_.size(); ++id)
      if (is_special_type(static_cast<int32_t>(id)) || !byte_level_decode(tokens_[id], texts_[id]))
        texts_[id] = tokens_[id];
  }

  bool is_special_type(int32_t id) const {
    return types_[id] == kBpeControl || types_[id] == kBpeUserDefined;
  }

 protected:
  int32_t base_vocab_size() const override { return static_cast<int32_t>(tokens_.size()); }

  void encode_text(std::string_view text, bool, std::vector<int32_t>& out) const override {
    std::vector<std::string> pieces;
    pre_.split(text, pieces);
    for (const auto& piece : pieces) encode_piece(piece, out);
  }

  std::string base_piece(int32_t id) const override { return tokens_[id]; }
  int32_t base_piece_to_id(const std::string& piece) const override {
    auto it = ids_.find(piece);
    return it == ids_.end() ? -1 : it->second;
  }
  float base_score(int32_t) const override { return 0.0f; }  // merges rank pairs, not pieces
  std::string base_llama2c_piece(int32_t id) const override { return texts_[id]; }
  bool base_is_control(int32_t id) const override { return types_[id] == kBpeControl; }
  int base_byte(int32_t) const override { return -1; }
  bool adds_dummy_prefix() const override { return false; }
  void append_base_text(int32_t id, bool& at_start, std::string& out) const override {
    out += texts_[id];
    at_start = false;
  }
  bool strips_space_after_bos() const override { return false; }
  bool adds_bos() const override { return add_bos_; }

 private:
  struct Merge {
    int32_t rank, merged;
  };
  static uint64_t pair_key(int32_t l, int32_t r) {
    return static_cast<uint64_t>(static_cast<uint32_t>(l)) << 32 | static_cast<uint32_t>(r);
  }

  // One pre-tokenized piece (raw bytes): its bytes as byte-level tokens, then merges.
  void encode_piece(const std::string& piece, std::vector<int32_t>& out) const {
    if (ignore_merges_) {  // tokenizers' ignore_merges: a piece already in the vocabulary wins
      auto it = ids_.find(byte_level_encode(piece));
      if (it != ids_.end()) {
        out.push_back(it->second);
        return;
      }
    }
    // A doubly linked list of symbols and a heap of candidate merges, (rank, position) first
    // as tokenizers' Word::merge_all: O(n log n) on long pieces (whitespace runs, digits
    // off). Entries made stale by an earlier merge are recognised by the ids they expected.
    struct Symbol {
      int32_t id;
      int prev, next;
    };
    std::vector<Symbol> syms;
    syms.reserve(piece.size());
    for (unsigned char b : piece) {
      int32_t id = byte_ids_[b];
      if (id < 0) {
        if (unk_id() < 0)
          fail(source(), "byte 0x" + hex(b) + " has no byte-level token and there is no <unk>");
        id = unk_id();
      }
      int i = static_cast<int>(syms.size());
      syms.push_back({id, i - 1, i + 1});
    }
    if (syms.empty()) return;
    syms.back().next = -1;
    struct Candidate {
      int32_t rank;
      int left;
      int32_t left_id, right_id;
      bool operator>(const Candidate& o) const {
        return rank != o.rank ? rank > o.rank : left > o.left;
      }
    };
    std::priority_queue<Candidate, std::vector<Candidate>, std::greater<>> heap;
    auto consider = [&](int left) {
      if (left < 0 || syms[left].next < 0) return;
      int32_t l = syms[left].id, r = syms[syms[left].next].id;
      auto it = merges_.find(pair_key(l, r));
      if (it != merges_.end()) heap.push({it->second.rank, left, l, r});
    };
    for (int i = 0; i + 1 < static_cast<int>(syms.size()); ++i) consider(i);
    while (!heap.empty()) {
      Candidate c = heap.top();
      heap.pop();
      Symbol& left = syms[c.left];
      // Stale: the left symbol was absorbed (id -1) or changed, or its neighbour changed.
      if (left.id != c.left_id || left.next < 0 || syms[left.next].id != c.right_id) continue;
      int right = left.next;
      left.id = merges_.at(pair_key(c.left_id, c.right_id)).merged;
      left.next = syms[right].next;
      if (left.next >= 0) syms[left.next].prev = c.left;
      syms[right].id = -1;
      consider(left.prev);
      consider(c.left);
    }
    for (int i = 0; i >= 0; i = syms[i].next) out.push_back(syms[i].id);
  }

  static std::string hex(unsigned char b) {
    const char* digits = "0123456789ABCDEF";
    return {digits[b >> 4], digits[b & 15]};
  }

  std::vector<std::string> tokens_;
  std::vector<int32_t> types_;
  std::vector<std::string> texts_;  // what each id decodes to
  std::unordered_map<std::string, int32_t> ids_;
  std::unordered_map<uint64_t, Merge> merges_;  // (left id, right id) -> rank, merged id
  int32_t byte_ids_[256];
  PreTokenizer pre_;
  bool ignore_merges_;
  bool add_bos_ = false;
};

// The one constructor path both file formats take: checks, then special-token registration.
std::unique_ptr<BpeTokenizer> build(std::string source, std::vector<std::string> tokens,
                                 std::vector<int32_t> types, const std::vector<MergePair>& merges,
                                 int32_t bos, int32_t eos, int32_t unk, int32_t pad,
                                 const PreTokenizerSpec& pre, bool ignore_merges) {
  if (tokens.empty()) fail(source, "byte-level BPE vocabulary with no tokens");
  if (types.empty()) types.assign(tokens.size(), kBpeNormal);
  if (types.size() != tokens.size())
    fail(source, std::to_string(types.size()) + " token types for " +
                     std::to_string(tokens.size()) + " tokens");
  const int32_t n = static_cast<int32_t>(tokens.size());
  for (auto [what, id] : {std::pair{"BOS", bos}, {"EOS", eos}, {"UNK", unk}, {"PAD", pad}})
    if (id < -1 || id >= n)
      fail(source, std::string(what) + " id " + std::to_string(id) + " is outside the vocabulary (0.." +
                       std::to_string(n - 1) + ")");
  if (pad < 0) pad = eos;
  std::vector<std::string> specials;
  for (int32_t id = 0; id < n; ++id)
    if ((types[id] == kBpeControl || types[id] == kBpeUserDefined) && !tokens[id].empty())
      specials.push_back(tokens[id]);
  auto tok = std::make_unique<BpeTokenizer>(std::move(source), std::move(tokens), std::move(types),
                                            merges, bos, eos, unk, pad, pre, ignore_merges);
  tok->add_special_tokens(specials);  // all in the vocabulary already: they keep their ids
  return tok;
}

}  // namespace

std::unique_ptr<Tokenizer> make_bpe_tokenizer(std::string source, BpeVocabulary vocab,
                                              const PreTokenizerSpec& pre, bool ignore_merges) {
  std::vector<MergePair> merges;
  merges.reserve(vocab.merges.size());
  for (size_t i = 0; i < vocab.merges.size(); ++i) {
    const std::string& m = vocab.merges[i];
    size_t space = m.find(' ');
    // Byte-level tokens spell a space "Ġ", so a merge holds exactly one space.
    if (space == std::string::npos || space == 0 || space + 1 == m.size() ||
        m.find(' ', space + 1) != std::string::npos)
      fail(source, "merge " + std::to_string(i) + " (\"" + m + "\") is not two tokens separated by one space");
    merges.emplace_back(m.substr(0, space), m.substr(space + 1));
  }
  auto tok = build(std::move(source), std::move(vocab.tokens), std::move(vocab.token_types), merges, vocab.bos,
                   vocab.eos, vocab.unk, vocab.pad, pre, ignore_merges);
  tok->set_adds_bos(vocab.add_bos);
  return tok;
}

std::unique_ptr<Tokenizer> make_bpe_tokenizer(std::string source, BpeVocabulary vocab) {
  PreTokenizerSpec pre = pre_tokenizer_for_gguf_name(vocab.pre, source);
  const bool ignore_merges = gguf_pre_ignores_merges(vocab.pre);
  return make_bpe_tokenizer(std::move(source), std::move(vocab), pre, ignore_merges);
}

}  // namespace gt

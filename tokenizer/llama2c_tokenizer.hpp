#pragma once
// llama2.c's tokenizer .bin and the encoder of its run.c, reimplemented so that ids match
// run.c exactly (the golden generation test depends on it).
//
// File: int32 max_token_length, then per token: float32 score, int32 byte length, the bytes.
// The vocabulary size is not stored (run.c takes it from the model): it is the number of
// entries, read to the end of the file, which must end exactly after one.
// Pieces are spelled as llama2.c's export writes them: a space for SentencePiece's "▁", and
// "\n<s>\n" / "\n</s>\n" for BOS (id 1) and EOS (id 2), which run.c hard-codes.
#include <memory>
#include <string>
#include <unordered_map>
#include <vector>

#include "tokenizer/tokenizer.hpp"

namespace gt {

// A header above this is not a llama2.c tokenizer (load_tokenizer tries SentencePiece then).
constexpr int32_t kLlama2cMaxTokenLength = 65535;

// "<0xNN>" -> NN, else -1. run.c's sscanf("<0x%02hhX>") also accepts malformed variants
// ("<0x4", "<0x41junk"); no real vocabulary has them, so only the exact form counts.
int parse_byte_piece(const std::string& piece);

class Llama2cTokenizer : public Tokenizer {
 public:
  // pieces and scores in llama2.c's spelling; id 0 is <unk>, 1 BOS, 2 EOS (at least 3 pieces).
  Llama2cTokenizer(std::string source, std::vector<std::string> pieces, std::vector<float> scores);

 protected:
  int32_t base_vocab_size() const override { return static_cast<int32_t>(pieces_.size()); }
  void encode_text(std::string_view text, bool dummy_prefix,
                   std::vector<int32_t>& out) const override;
  std::string base_piece(int32_t id) const override;
  int32_t base_piece_to_id(const std::string& piece) const override;
  float base_score(int32_t id) const override { return scores_[id]; }
  std::string base_llama2c_piece(int32_t id) const override { return pieces_[id]; }
  // run.c puts a " " token before non-empty text; a vocabulary without one (the byte
  // tokenizer) gets no dummy prefix, where run.c would emit id -1.
  bool adds_dummy_prefix() const override { return space_id_ >= 0; }

 private:
  std::vector<std::string> pieces_;
  std::vector<float> scores_;
  std::unordered_map<std::string, int32_t> raw_ids_;  // llama2.c spelling -> id (first wins)
  std::unordered_map<std::string, int32_t> sp_ids_;   // SentencePiece spelling -> id
  int32_t byte_ids_[256];  // the <0xNN> pieces (ids 3..258 in practice, run.c's byte + 3)
  int32_t space_id_ = -1;
};

// Reads a .bin already in memory; problems are InputErrors naming path.
std::unique_ptr<Tokenizer> parse_llama2c_tokenizer(const std::string& bytes,
                                                   const std::string& path);

}  // namespace gt

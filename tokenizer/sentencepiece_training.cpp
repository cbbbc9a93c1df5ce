#include "tokenizer/sentencepiece_training.hpp"

#include <sentencepiece_trainer.h>

#include "common/error.hpp"

namespace gt {

namespace {

class LineIterator : public sentencepiece::SentenceIterator {
 public:
  explicit LineIterator(const std::vector<std::string>& texts) : texts_(texts) { advance(); }
  bool done() const override { return text_ >= texts_.size(); }
  void Next() override {
    ++pos_;
    advance();
  }
  const std::string& value() const override { return line_; }
  sentencepiece::util::Status status() const override { return {}; }

 private:
  // Moves to the next non-empty line at or after (text_, pos_).
  void advance() {
    for (; text_ < texts_.size(); ++text_, pos_ = 0) {
      const std::string& t = texts_[text_];
      while (pos_ <= t.size()) {
        size_t end = t.find('\n', pos_);
        if (end == std::string::npos) end = t.size();
        if (end > pos_) {
          line_ = t.substr(pos_, end - pos_);
          pos_ = end;  // Next() steps over the line break
          return;
        }
        pos_ = end + 1;
      }
    }
  }
  const std::vector<std::string>& texts_;
  size_t text_ = 0, pos_ = 0;
  std::string line_;
};

}  // namespace

std::string train_sentencepiece(const std::vector<std::string>& texts, int32_t vocab_size, const std::string& where) {
  // 256 byte pieces + unk/bos/eos, and room for merges.
  if (vocab_size < 300 || vocab_size > 1 << 20)
    fail(where, "a trained tokenizer's vocabulary must be in [300, 1048576], got " + std::to_string(vocab_size));
  LineIterator lines(texts);
  if (lines.done()) fail(where, "no text to train a tokenizer on");
  const std::string args =
      "--model_type=bpe --vocab_size=" + std::to_string(vocab_size) +
      " --byte_fallback=true --split_digits=true --character_coverage=1.0 --normalization_rule_name=identity"
      " --remove_extra_whitespaces=false --allow_whitespace_only_pieces=true --add_dummy_prefix=true"
      " --unk_id=0 --bos_id=1 --eos_id=2 --pad_id=-1 --num_threads=1 --max_sentence_length=65536"
      " --input_sentence_size=0 --minloglevel=2";
  std::string model;
  const auto status = sentencepiece::SentencePieceTrainer::Train(args, &lines, &model);
  if (!status.ok()) fail(where, "SentencePiece training failed: " + status.ToString());
  return model;
}

}  // namespace gt

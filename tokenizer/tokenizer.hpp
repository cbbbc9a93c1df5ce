#pragma once
// Text <-> token ids for LLaMA-family models, in two file formats: SentencePiece's
// tokenizer.model (what Vicuna/LLaMA folders ship) and llama2.c's tokenizer .bin. No libtorch.
//
// Special tokens (GraphGPT's <g_patch>, <g_start>, <g_end>) are handled here, above both
// formats, the way Hugging Face handles "added tokens": the text is split at every occurrence
// of a registered special token, each one becomes its single id, and the text between them is
// encoded normally. The SentencePiece dummy prefix (the "▁" put before the text) applies only
// at the start of the whole text, never at the start of a segment after a special token; no
// whitespace around special tokens is stripped. This is what HF's LlamaTokenizer does with
// legacy=False (and LlamaTokenizerFast, Metaspace prepend_scheme="first"). HF's legacy slow
// tokenizer instead gives every segment its own dummy prefix ("<g_end>x" -> "▁x"), and before
// transformers 4.34 it also stripped whitespace on both sides of tokens added as plain strings.
// We don't copy that: here concatenating texts is the same as concatenating their ids.
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

namespace gt {

class Tokenizer {
 public:
  virtual ~Tokenizer() = default;
  Tokenizer(const Tokenizer&) = delete;
  Tokenizer& operator=(const Tokenizer&) = delete;

  // Ids for text, with BOS first / EOS last when asked.
  std::vector<int32_t> encode(const std::string& text, bool bos, bool eos) const;
  // Whole-sequence decoding, by the format's rules (byte-level BPE: tokenizer/bpe_tokenizer.hpp);
  // by default SentencePiece's: "▁" is a space, <0xNN> pieces are raw bytes, the dummy
  // prefix's space at the very start is removed, BOS/EOS/control ids give nothing, <unk>
  // gives " ⁇ ". Added special tokens give their text, so that
  // decode(encode(s)) == s. Bytes are returned raw (not checked to be UTF-8).
  // An id outside the vocabulary is an InputError naming source().
  std::string decode(const std::vector<int32_t>& ids) const;
  // Streaming decoding of one id, exactly llama2.c run.c's decode(): the piece as llama2.c's
  // tokenizer .bin spells it (llama2c_piece), with its leading space dropped when prev is BOS,
  // and <0xNN> turned into that one raw byte.
  std::string decode_piece(int32_t prev, int32_t id) const;
  // run.c's safe_printf() prints a piece unless it is empty or a single byte that is neither
  // printable nor whitespace (in the C locale): a stray byte of a split UTF-8 character.
  static bool is_printable_piece(const std::string& piece);

  int32_t vocab_size() const;  // the format's pieces plus the added special tokens
  int32_t unk_id() const { return unk_; }
  int32_t bos_id() const { return bos_; }
  int32_t eos_id() const { return eos_; }
  int32_t pad_id() const { return pad_; }  // LLaMA has no pad piece: pad is <unk> (0)
  // Whether the model reads a plain text with BOS first, as it was trained: LLaMA's
  // SentencePiece and llama2.c do; byte-level BPE models say so in their file (SmolLM2 does not).
  virtual bool adds_bos() const { return true; }
  // Pieces in SentencePiece's spelling ("▁the", "<0x0A>", "<s>"); -1 when absent.
  int32_t piece_to_id(const std::string& piece) const;
  std::string id_to_piece(int32_t id) const;
  float score(int32_t id) const;  // merge priority (0 for added tokens)
  // The bytes llama2.c's export writes for this id: spaces for "▁", "\n<s>\n" and "\n</s>\n"
  // for BOS and EOS.
  std::string llama2c_piece(int32_t id) const;

  // Registers special tokens: new ones get the next ids (GraphGPT's three become
  // 32000..32002 on LLaMA); ones already present (in the vocabulary or added before) keep
  // their id. From now on encode() emits each as its own id wherever its text appears.
  std::vector<int32_t> add_special_tokens(const std::vector<std::string>& pieces);
  bool is_added_token(int32_t id) const { return id >= base_vocab_size() && id < vocab_size(); }

  // A model whose embedding has rows past its tokenizer (Qwen2.5's 152,064 for 151,665 pieces):
  // the ids in [vocab_size(), model_vocab) are no piece, and decode to nothing, as Hugging Face's
  // decode skips ids its tokenizer lacks.
  void allow_unused_ids(int32_t model_vocab) { unused_until_ = model_vocab; }
  bool is_unused_id(int32_t id) const { return id >= vocab_size() && id < unused_until_; }

  // Where it came from, for messages: the file path or "<built-in byte tokenizer>".
  const std::string& source() const { return source_; }

 protected:
  Tokenizer(std::string source, int32_t unk, int32_t bos, int32_t eos, int32_t pad)
      : source_(std::move(source)), unk_(unk), bos_(bos), eos_(eos), pad_(pad) {}

  // What each format provides, for ids in [0, base_vocab_size()).
  virtual int32_t base_vocab_size() const = 0;
  // Appends the ids of text (which holds no special token); dummy_prefix says whether this
  // text starts the whole input, where the format's dummy prefix (if any) goes.
  virtual void encode_text(std::string_view text, bool dummy_prefix,
                           std::vector<int32_t>& out) const = 0;
  virtual std::string base_piece(int32_t id) const = 0;                // SentencePiece spelling
  virtual int32_t base_piece_to_id(const std::string& piece) const = 0;  // -1 when absent
  virtual float base_score(int32_t id) const = 0;
  virtual std::string base_llama2c_piece(int32_t id) const;  // default: from base_piece
  virtual bool base_is_control(int32_t id) const { return id == bos_ || id == eos_; }
  virtual int base_byte(int32_t id) const;  // the byte of a <0xNN> piece, or -1
  virtual bool adds_dummy_prefix() const = 0;
  // Appends what id (a base id) decodes to within a sequence; at_start: nothing visible came
  // before it. Default: SentencePiece's rules (decode()); byte-level BPE maps its alphabet
  // back to bytes instead.
  virtual void append_base_text(int32_t id, bool& at_start, std::string& out) const;
  // run.c drops a piece's leading space after BOS, undoing SentencePiece's dummy prefix; a
  // format without that prefix keeps the space.
  virtual bool strips_space_after_bos() const { return true; }

 private:
  void check_id(int32_t id) const;
  std::string source_;
  int32_t unk_, bos_, eos_, pad_;
  std::vector<std::string> added_;                          // ids base_vocab_size() + i
  std::unordered_map<std::string, int32_t> special_ids_;    // every registered special token
  int32_t unused_until_ = 0;                                // allow_unused_ids
};

// Loads tokenizer.model (SentencePiece protobuf) or a llama2.c tokenizer .bin, told apart by
// content, not by name, the vocabulary of a GGUF model file (tokenizer/gguf_tokenizer.hpp), or a
// Hugging Face tokenizer.json (byte-level BPE, by its .json name); "bytes" is the built-in byte
// tokenizer (byte_tokenizer()); a model preset (formats/model_presets.hpp) is its model file. Any problem
// is an InputError naming the path.
std::unique_ptr<Tokenizer> load_tokenizer(const std::string& path);
// The same, then the vocabulary must be the model's: as large, or smaller by at most
// kMaxUnusedRows rows the model pads its embedding with (those ids allowed as unused), else an
// InputError such as "tok512.bin: tokenizer vocab 512 does not match model vocab 32000".
std::unique_ptr<Tokenizer> load_tokenizer(const std::string& path, int32_t expected_vocab);
// That check (and allow_unused_ids) alone, for a tokenizer that first gets special tokens (a
// GraphGPT model has 32003).
void check_tokenizer_vocab(Tokenizer& tok, int32_t model_vocab);
// Models pad their embedding to a round size (Qwen2.5-7B by 399 rows, others to a multiple of
// 64 or 128); more spare rows than this means another vocabulary.
inline constexpr int32_t kMaxUnusedRows = 1024;

// Built in: <unk>=0, <s>=1, </s>=2, then <0x00>..<0xFF> (ids 3..258) and nothing else, so every
// byte is one token and there is no dummy prefix. The demo trains a tiny model on it.
std::unique_ptr<Tokenizer> byte_tokenizer();

// Writes any tokenizer (added tokens included) as a llama2.c .bin, atomically, so that
// `graphtune generate --tokenizer` and llama2.c's run.c can read it back. For LLaMA's
// tokenizer.model this reproduces llama2.c's tokenizer.bin byte for byte.
void save_llama2c_tokenizer(const Tokenizer& tok, const std::string& path);

}  // namespace gt

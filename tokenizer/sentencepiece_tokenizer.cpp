#include "tokenizer/sentencepiece_tokenizer.hpp"

#include <sentencepiece_processor.h>

#include <algorithm>
#include <cstring>

#include "common/error.hpp"
#include "common/printable.hpp"
#include "tokenizer/llama2c_tokenizer.hpp"  // parse_byte_piece

namespace gt {

namespace {

// Just enough protobuf wire format to turn off NormalizerSpec.add_dummy_prefix, as Hugging
// Face's non-legacy LlamaTokenizer does, without linking a protobuf library of our own (the
// one inside libsentencepiece is private to it).
// ModelProto field 3 is normalizer_spec; NormalizerSpec field 3 is add_dummy_prefix (a bool,
// default true).
constexpr uint32_t kNormalizerSpec = 3, kAddDummyPrefix = 3;

struct Field {
  uint32_t number = 0;
  uint32_t wire = 0;
  size_t begin = 0, end = 0;              // the whole field, tag included
  size_t value_begin = 0, value_end = 0;  // length-delimited payload (wire type 2)
  uint64_t varint = 0;                    // value (wire type 0)
};

bool read_varint(const std::string& s, size_t& pos, uint64_t& v) {
  v = 0;
  for (int shift = 0; shift < 64 && pos < s.size(); shift += 7) {
    uint8_t b = static_cast<uint8_t>(s[pos++]);
    v |= static_cast<uint64_t>(b & 0x7F) << shift;
    if (!(b & 0x80)) return true;
  }
  return false;
}

// Reads the field at pos of message s[.., limit); false on malformed input.
bool next_field(const std::string& s, size_t& pos, size_t limit, Field& f) {
  f = Field{};
  f.begin = pos;
  uint64_t tag;
  if (!read_varint(s, pos, tag) || pos > limit) return false;
  f.number = static_cast<uint32_t>(tag >> 3);
  f.wire = static_cast<uint32_t>(tag & 7);
  switch (f.wire) {
    case 0:
      if (!read_varint(s, pos, f.varint)) return false;
      break;
    case 1: pos += 8; break;
    case 5: pos += 4; break;
    case 2: {
      uint64_t len;
      if (!read_varint(s, pos, len) || len > limit - std::min(pos, limit)) return false;
      f.value_begin = pos;
      pos += len;
      f.value_end = pos;
      break;
    }
    default: return false;  // groups (3, 4) don't occur in sentencepiece_model.proto
  }
  f.end = pos;
  return pos <= limit;
}

void append_varint(std::string& out, uint64_t v) {
  do {
    uint8_t b = v & 0x7F;
    v >>= 7;
    out += static_cast<char>(v ? b | 0x80 : b);
  } while (v);
}

// Writers for the fields a ModelProto built from a GGUF vocabulary needs.
void put_tag(std::string& out, uint32_t field, uint32_t wire) { append_varint(out, field << 3 | wire); }
void put_varint(std::string& out, uint32_t field, uint64_t v) {
  put_tag(out, field, 0);
  append_varint(out, v);
}
// int32 fields: a negative value is its 64-bit two's complement, ten bytes, as protobuf writes it.
void put_int32(std::string& out, uint32_t field, int32_t v) { put_varint(out, field, static_cast<uint64_t>(int64_t{v})); }
void put_bytes(std::string& out, uint32_t field, const std::string& s) {
  put_tag(out, field, 2);
  append_varint(out, s.size());
  out += s;
}
void put_float(std::string& out, uint32_t field, float f) {
  put_tag(out, field, 5);
  uint32_t bits;
  std::memcpy(&bits, &f, sizeof bits);
  for (int i = 0; i < 4; ++i) out += static_cast<char>(bits >> (8 * i) & 0xFF);  // little-endian fixed32
}

// sentencepiece_model.proto's numbers.
constexpr uint32_t kPieces = 1, kTrainerSpec = 2;
constexpr uint32_t kPiece = 1, kScore = 2, kType = 3;
constexpr uint32_t kModelType = 3, kByteFallback = 35, kUnkId = 40, kBosId = 41, kEosId = 42, kPadId = 43,
                   kUnkPiece = 45, kBosPiece = 46, kEosPiece = 47, kPadPiece = 48;
constexpr uint32_t kNormalizerName = 1, kRemoveExtraWhitespaces = 4, kEscapeWhitespaces = 5;
constexpr uint64_t kBpe = 2;
constexpr int32_t kUnknownType = 2, kControlType = 3, kByteType = 6;

// The model with add_dummy_prefix forced off; had_prefix says whether it was on. Repeated
// embedded messages merge in protobuf, so every normalizer_spec occurrence is folded into one.
bool without_dummy_prefix(const std::string& model, std::string& out, bool& had_prefix) {
  std::string rest, spec;
  had_prefix = true;
  Field f;
  for (size_t pos = 0; pos < model.size();) {
    if (!next_field(model, pos, model.size(), f)) return false;
    if (f.number != kNormalizerSpec || f.wire != 2) {
      rest.append(model, f.begin, f.end - f.begin);
      continue;
    }
    Field g;
    for (size_t p = f.value_begin; p < f.value_end;) {
      if (!next_field(model, p, f.value_end, g)) return false;
      if (g.number == kAddDummyPrefix && g.wire == 0)
        had_prefix = g.varint != 0;
      else
        spec.append(model, g.begin, g.end - g.begin);
    }
  }
  spec += static_cast<char>(kAddDummyPrefix << 3);  // tag, wire type 0
  spec += '\0';                                      // false
  out = rest;
  out += static_cast<char>(kNormalizerSpec << 3 | 2);
  append_varint(out, spec.size());
  out += spec;
  return true;
}

class SentencePieceTokenizer : public Tokenizer {
 public:
  SentencePieceTokenizer(const std::string& path, std::unique_ptr<sentencepiece::SentencePieceProcessor> sp,
                         std::unique_ptr<sentencepiece::SentencePieceProcessor> no_prefix)
      : Tokenizer(path, sp->unk_id(), sp->bos_id(), sp->eos_id(),
                  sp->pad_id() >= 0 ? sp->pad_id() : sp->unk_id()),
        sp_(std::move(sp)),
        no_prefix_(std::move(no_prefix)) {}

 protected:
  int32_t base_vocab_size() const override { return sp_->GetPieceSize(); }

  void encode_text(std::string_view text, bool dummy_prefix,
                   std::vector<int32_t>& out) const override {
    std::vector<int> ids;
    const auto& sp = dummy_prefix || !no_prefix_ ? *sp_ : *no_prefix_;
    auto status = sp.Encode(absl::string_view(text.data(), text.size()), &ids);
    if (!status.ok()) fail(source(), std::string("sentencepiece cannot encode: ") + status.message());
    out.insert(out.end(), ids.begin(), ids.end());
  }

  std::string base_piece(int32_t id) const override { return sp_->IdToPiece(id); }

  int32_t base_piece_to_id(const std::string& piece) const override {
    int id = sp_->PieceToId(piece);  // <unk>'s id when absent
    return sp_->IdToPiece(id) == piece ? id : -1;
  }

  float base_score(int32_t id) const override { return sp_->GetScore(id); }
  bool base_is_control(int32_t id) const override { return sp_->IsControl(id); }
  int base_byte(int32_t id) const override {
    return sp_->IsByte(id) ? parse_byte_piece(sp_->IdToPiece(id)) : -1;
  }
  bool adds_dummy_prefix() const override { return no_prefix_ != nullptr; }

 private:
  std::unique_ptr<sentencepiece::SentencePieceProcessor> sp_;
  // The same model without the dummy prefix, for text after a special token; null when the
  // model has no dummy prefix to begin with.
  std::unique_ptr<sentencepiece::SentencePieceProcessor> no_prefix_;
};

std::unique_ptr<Tokenizer> load_model(const std::string& bytes, const std::string& path, const std::string& what) {
  auto sp = std::make_unique<sentencepiece::SentencePieceProcessor>();
  auto status = sp->LoadFromSerializedProto(absl::string_view(bytes.data(), bytes.size()));
  if (!status.ok()) {
    // libsentencepiece names its own source line; say what it means instead.
    std::string why = status.message();
    if (why.find("ParseFromArray") != std::string::npos) why = "not a SentencePiece protobuf";
    fail(path, what + " (" + why + ")");
  }
  if (sp->GetPieceSize() <= 0) fail(path, "SentencePiece model with no pieces");
  std::string patched;
  bool had_prefix = true;
  if (!without_dummy_prefix(bytes, patched, had_prefix))
    fail(path, "SentencePiece model: malformed protobuf");
  std::unique_ptr<sentencepiece::SentencePieceProcessor> no_prefix;
  if (had_prefix) {
    no_prefix = std::make_unique<sentencepiece::SentencePieceProcessor>();
    status = no_prefix->LoadFromSerializedProto(absl::string_view(patched.data(), patched.size()));
    if (!status.ok()) fail(path, std::string("SentencePiece model: ") + status.message());
  }
  return std::make_unique<SentencePieceTokenizer>(path, std::move(sp), std::move(no_prefix));
}

}  // namespace

std::unique_ptr<Tokenizer> parse_sentencepiece_tokenizer(const std::string& bytes, const std::string& path) {
  return load_model(bytes, path, "neither a SentencePiece model nor a llama2.c tokenizer .bin");
}

// Written by hand rather than through protobuf: libsentencepiece reads only a serialized
// ModelProto, and the protobuf library inside it is private to it.
std::string sentencepiece_model_bytes(const SentencePieceVocabulary& v, const std::string& path) {
  const size_t n = v.pieces.size();
  if (n == 0) fail(path, "tokenizer.ggml.tokens is empty");
  if (v.scores.size() != n || v.types.size() != n)
    fail(path, "tokenizer.ggml.tokens has " + std::to_string(n) + " pieces but tokenizer.ggml.scores " +
                   std::to_string(v.scores.size()) + " and tokenizer.ggml.token_type " + std::to_string(v.types.size()));
  bool bytes = false;
  for (size_t i = 0; i < n; ++i) {
    if (v.types[i] < 1 || v.types[i] > 6)
      fail(path, "tokenizer.ggml.token_type[" + std::to_string(i) + "] is " + std::to_string(v.types[i]) +
                     " (SentencePiece's types are 1 to 6)");
    bytes |= v.types[i] == kByteType;
  }
  // Each special id must name a piece of the type SentencePiece finds it by: BOS and EOS control
  // pieces, UNK the unknown piece (libsentencepiece refuses a model without one).
  auto special = [&](const char* key, int32_t id, int32_t type) {
    if (id < 0) return;
    if (static_cast<size_t>(id) >= n) fail(path, std::string(key) + " " + std::to_string(id) + " is not a piece id");
    if (v.types[id] != type)
      fail(path, std::string(key) + " " + std::to_string(id) + " ('" + printable(v.pieces[id]) + "') has token_type " +
                     std::to_string(v.types[id]) + ", not " + std::to_string(type));
  };
  if (v.unk < 0) fail(path, "tokenizer.ggml.unknown_token_id is negative (a SentencePiece vocabulary has one)");
  special("tokenizer.ggml.unknown_token_id", v.unk, kUnknownType);
  special("tokenizer.ggml.bos_token_id", v.bos, kControlType);
  special("tokenizer.ggml.eos_token_id", v.eos, kControlType);
  if (v.pad >= 0 && static_cast<size_t>(v.pad) >= n)
    fail(path, "tokenizer.ggml.padding_token_id " + std::to_string(v.pad) + " is not a piece id");
  // Many LLaMA and Vicuna files pad with <unk> or </s>: SentencePiece has no separate padding
  // piece then, and the tokenizer pads with <unk> as it does for LLaMA's own tokenizer.model.
  const int32_t pad = v.pad >= 0 && v.types[v.pad] == kControlType && v.pad != v.bos && v.pad != v.eos ? v.pad : -1;

  std::string model;
  for (size_t i = 0; i < n; ++i) {
    std::string piece;
    put_bytes(piece, kPiece, v.pieces[i]);
    put_float(piece, kScore, v.scores[i]);
    put_varint(piece, kType, static_cast<uint64_t>(v.types[i]));
    put_bytes(model, kPieces, piece);
  }
  std::string trainer;
  put_varint(trainer, kModelType, kBpe);
  put_varint(trainer, kByteFallback, bytes);
  const std::pair<uint32_t, int32_t> ids[] = {{kUnkId, v.unk}, {kBosId, v.bos}, {kEosId, v.eos}, {kPadId, pad}};
  for (const auto& [field, id] : ids) put_int32(trainer, field, id);
  // libsentencepiece finds its special ids by these names, whatever the ids say.
  const std::pair<uint32_t, int32_t> names[] = {{kUnkPiece, v.unk}, {kBosPiece, v.bos}, {kEosPiece, v.eos},
                                                {kPadPiece, pad}};
  for (const auto& [field, id] : names)
    if (id >= 0) put_bytes(trainer, field, v.pieces[id]);
  put_bytes(model, kTrainerSpec, trainer);
  std::string normalizer;
  put_bytes(normalizer, kNormalizerName, "identity");
  put_varint(normalizer, kAddDummyPrefix, v.add_dummy_prefix);
  put_varint(normalizer, kRemoveExtraWhitespaces, 0);
  put_varint(normalizer, kEscapeWhitespaces, 1);
  put_bytes(model, kNormalizerSpec, normalizer);
  return model;
}

std::unique_ptr<Tokenizer> sentencepiece_from_vocabulary(const SentencePieceVocabulary& v, const std::string& path) {
  return load_model(sentencepiece_model_bytes(v, path), path, "its SentencePiece vocabulary cannot be read");
}

}  // namespace gt

#pragma once
// Training a SentencePiece tokenizer on the texts a job already has, for a model that starts
// from scratch (no pretrained tokenizer can be downloaded). LLaMA's recipe: BPE with byte
// fallback (every byte encodable, so no <unk> in practice), digits split, identity
// normalisation, whitespace kept as is; ids unk 0, bos 1, eos 2, no pad piece. The result is
// an ordinary tokenizer.model that Python's sentencepiece and graphtune both load. No libtorch.
#include <cstdint>
#include <string>
#include <vector>

namespace gt {

// Trains on `texts` (each split into lines; empty lines dropped) and returns the serialized
// model (the bytes of a tokenizer.model). Deterministic: one training thread, every line used.
// InputError naming `where` when vocab_size is out of range or the trainer refuses the input
// (e.g. too few distinct pieces for the vocabulary asked for).
std::string train_sentencepiece(const std::vector<std::string>& texts, int32_t vocab_size, const std::string& where);

}  // namespace gt

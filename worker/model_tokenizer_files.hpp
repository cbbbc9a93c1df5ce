#pragma once
// The tokenizer a model carries, as files a Hugging Face folder holds, for the folders graphtune
// writes from a model (convert, export): a folder's own tokenizer files are copied; a GGUF file's
// vocabulary is written as tokenizer.model (SentencePiece) or tokenizer.json with
// tokenizer_config.json (byte-level BPE). A llama2.c file carries none.
#include <string>

namespace gt {

// Writes them into dir; returns what was written, for the command's summary ("" for nothing).
std::string write_model_tokenizer_files(const std::string& model_path, const std::string& dir);

}  // namespace gt

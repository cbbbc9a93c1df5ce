// A GGUF file from anywhere (a model hub download, a file cut short): opening it must end in the
// project's InputError, one line, or in a file whose every tensor lies inside it, after the
// data section's start; and its metadata reads back by type, or says why not in one line.
// GgufFile maps a path, so each input is written to one file first.
#include <unistd.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>

#include "common/error.hpp"
#include "formats/gguf.hpp"
#include "tests/fuzz/fuzz_check.hpp"

namespace {

std::string input_path() {
  const char* dir = std::getenv("TMPDIR");
  return std::string(dir && *dir ? dir : "/tmp") + "/graphtune-fuzz-gguf-" + std::to_string(::getpid()) + ".gguf";
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static const std::string path = input_path();
  FILE* f = std::fopen(path.c_str(), "wb");
  FUZZ_CHECK(f != nullptr, "cannot write the input file");
  FUZZ_CHECK(std::fwrite(data, 1, size, f) == size || size == 0, "cannot write the input file");
  std::fclose(f);
  try {
    const gt::GgufFile g = gt::GgufFile::open(path);
    FUZZ_CHECK(g.alignment() > 0, "alignment 0");
    // (A file without tensors may end before its aligned data section would start.)
    for (const gt::GgufTensorInfo& t : g.tensors()) {
      const unsigned __int128 end = static_cast<unsigned __int128>(g.data_start()) + t.offset + t.n_bytes;
      FUZZ_CHECK(end <= size, "a tensor outside the file");
      FUZZ_CHECK(g.contains(t.name), "a listed tensor that cannot be found by name");
    }
    // Every key reads back as its own type; asking for another type is an InputError.
    for (const std::string& key : g.keys()) {
      const gt::GgufValue* v = g.find(key);
      FUZZ_CHECK(v != nullptr, "a listed key that cannot be found");
      try {
        switch (v->kind) {
          case gt::GgufValue::Kind::Uint:
          case gt::GgufValue::Kind::Int: g.get_int(key); break;  // a UINT64 past int64: InputError
          case gt::GgufValue::Kind::Float: g.get_float(key); break;
          case gt::GgufValue::Kind::Bool: g.get_bool(key); break;
          case gt::GgufValue::Kind::String: g.get_string(key); break;
          case gt::GgufValue::Kind::Array: g.get_string_array(key); break;  // other elements: InputError
        }
      } catch (const gt::InputError& e) {
        FUZZ_CHECK(std::strchr(e.what(), '\n') == nullptr, "an error message spans lines");
      }
    }
  } catch (const gt::InputError& e) {
    FUZZ_CHECK(std::strchr(e.what(), '\n') == nullptr, "an error message spans lines");
  }
  return 0;
}

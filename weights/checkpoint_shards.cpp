#include "weights/checkpoint_shards.hpp"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <nlohmann/json.hpp>
#include <set>
#include <stdexcept>
#include <torch/torch.h>

#include "checkpoint/checkpoint_dir.hpp"
#include "checkpoint/file_io.hpp"
#include "common/error.hpp"
#include "common/fs.hpp"
#include "weights/safetensors.hpp"

namespace gt::ckpt {
namespace {

struct Planned {
  const SavedTensor* saved;
  std::string dtype;
  int64_t elem_bytes;
  std::vector<int64_t> global_shape, offset, shape;
  uint64_t nbytes;
};

// Checks one tensor against its place in the global tensor; a mismatch is the saver's bug.
Planned plan(const SavedTensor& t, const std::string& path) {
  if (!t.data.defined()) throw std::logic_error("write_shard: tensor \"" + t.key + "\" is undefined");
  Planned p;
  p.saved = &t;
  p.dtype = safetensors_dtype_name(t.data.scalar_type(), path + ": tensor \"" + t.key + "\"");
  p.elem_bytes = dtype_size(p.dtype, path + ": tensor \"" + t.key + "\"");
  p.shape = t.data.sizes().vec();
  p.global_shape = t.global_shape.empty() ? p.shape : t.global_shape;
  p.offset = t.offset.empty() ? std::vector<int64_t>(p.shape.size(), 0) : t.offset;
  bool fits = p.global_shape.size() == p.shape.size() && p.offset.size() == p.shape.size();
  for (size_t d = 0; fits && d < p.shape.size(); ++d)
    fits = p.offset[d] >= 0 && p.offset[d] + p.shape[d] <= p.global_shape[d];
  if (!fits) throw std::logic_error("write_shard: tensor \"" + t.key + "\" does not fit its global shape");
  p.nbytes = uint64_t(t.data.numel()) * uint64_t(p.elem_bytes);
  return p;
}

}  // namespace

WrittenShard write_shard(const std::string& folder, int rank, const std::vector<SavedTensor>& tensors) {
  WrittenShard out;
  out.file.rank = rank;
  if (tensors.empty()) return out;
  const std::string name = shard_file_name(rank);
  const std::string path = join_path(folder, name);

  std::vector<Planned> items;
  std::set<std::string> keys;
  for (const auto& t : tensors) {
    if (t.key == "__metadata__") throw std::logic_error("write_shard: a tensor cannot be named \"__metadata__\"");
    if (!keys.insert(t.key).second) throw std::logic_error("write_shard: tensor \"" + t.key + "\" given twice");
    items.push_back(plan(t, path));
  }
  // Widest elements first, as the safetensors package writes: the data section starts 8-byte
  // aligned and every tensor's bytes are a multiple of its element size, so each tensor stays
  // aligned to its element size and can be viewed in place from a mapping.
  std::stable_sort(items.begin(), items.end(),
                   [](const Planned& a, const Planned& b) { return a.elem_bytes > b.elem_bytes; });

  nlohmann::ordered_json header = nlohmann::ordered_json::object();
  uint64_t offset = 0;
  for (const auto& it : items) {
    header[it.saved->key] = {{"dtype", it.dtype}, {"shape", it.shape}, {"data_offsets", {offset, offset + it.nbytes}}};
    offset += it.nbytes;
  }
  std::string text = header.dump();
  text.append((8 - text.size() % 8) % 8, ' ');
  const uint64_t header_bytes = text.size();
  std::string prefix(reinterpret_cast<const char*>(&header_bytes), 8);
  prefix += text;
  const uint64_t data_start = prefix.size();

  const int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0) fail_io(path, "cannot create");
  uint32_t crc = crc32_start();
  try {
    write_all(fd, prefix.data(), prefix.size(), path);
    crc = crc32_update(crc, prefix.data(), prefix.size());
    uint64_t at = data_start;
    for (const auto& it : items) {
      // One tensor at a time on the CPU, so a device-resident model is never copied whole.
      const torch::Tensor cpu = it.saved->data.to(torch::kCPU).contiguous();
      const char* bytes = static_cast<const char*>(cpu.data_ptr());
      write_all(fd, bytes, it.nbytes, path);
      crc = crc32_update(crc, bytes, it.nbytes);
      TensorEntry entry;
      entry.dtype = it.dtype;
      entry.shape = it.global_shape;
      entry.chunks.push_back(Chunk{name, at, at + it.nbytes, it.offset, it.shape});
      out.tensors[it.saved->key] = std::move(entry);
      at += it.nbytes;
    }
    if (::fsync(fd) != 0) fail_io(path, "fsync failed");
  } catch (...) {
    ::close(fd);
    ::unlink(path.c_str());
    throw;
  }
  if (::close(fd) != 0) fail_io(path, "close failed");
  out.file.bytes = data_start + offset;
  out.file.crc32 = crc;
  return out;
}

struct CheckpointReader::OpenFile {
  const char* addr = nullptr;
  size_t len = 0;
  ~OpenFile() {
    if (addr) ::munmap(const_cast<char*>(addr), len);
  }
};

CheckpointReader::CheckpointReader(std::string folder)
    : folder_(strip_trailing_slashes(std::move(folder))), index_(read_index(folder_)) {}

CheckpointReader::~CheckpointReader() = default;

CheckpointReader::OpenFile& CheckpointReader::file(const std::string& name) {
  auto found = files_.find(name);
  if (found != files_.end()) return *found->second;
  const std::string path = folder_ + "/" + name;
  auto recorded = index_.files.find(name);
  if (recorded == index_.files.end()) fail(path, "not listed in the index");  // parse_index prevents this
  const FileEntry& entry = recorded->second;

  const int fd = open_recorded_file(path, entry);
  const uint64_t size = entry.bytes;
  auto open = std::make_unique<OpenFile>();
  if (size > 0) {
    // MAP_POPULATE: the kernel reads the whole file in at once with large requests, instead
    // of one page fault per 4 KiB page in the checksum pass (bench/checkpoint_io.sh, 975 MiB:
    // load 441 -> 1048 MiB/s).
    void* addr = ::mmap(nullptr, size, PROT_READ, MAP_PRIVATE | MAP_POPULATE, fd, 0);
    const int map_errno = errno;
    ::close(fd);
    if (addr == MAP_FAILED) fail(path, std::string("cannot map: ") + std::strerror(map_errno));
    open->addr = static_cast<const char*>(addr);
    open->len = size;
  } else {
    ::close(fd);
  }
  // The check pass reads the file front to back: tell the kernel to read ahead far. Afterwards
  // boxes are copied out in any order, so back to normal paging.
  if (open->len) ::madvise(const_cast<char*>(open->addr), open->len, MADV_SEQUENTIAL);
  const uint32_t crc = crc32_update(crc32_start(), open->addr, open->len);
  if (open->len) ::madvise(const_cast<char*>(open->addr), open->len, MADV_NORMAL);
  if (crc != entry.crc32) fail(path, "checksum mismatch (corrupted)");
  bytes_read_ += size;
  return *files_.emplace(name, std::move(open)).first->second;
}

at::Tensor CheckpointReader::read(const std::string& key, const Box& want) {
  auto found = index_.tensors.find(key);
  if (found == index_.tensors.end()) fail(folder_, "no tensor \"" + key + "\" in this checkpoint");
  const TensorEntry& entry = found->second;
  const auto options = torch::TensorOptions().dtype(safetensors_scalar_type(entry.dtype, folder_));
  const int64_t elem_bytes = dtype_size(entry.dtype, folder_);
  torch::Tensor result = torch::empty(want.shape, options);
  for (const Piece& piece : pieces_of(entry, want)) {
    const Chunk& chunk = entry.chunks[piece.chunk];
    const char* bytes = file(chunk.file).addr + chunk.begin;
    torch::Tensor source;
    if (reinterpret_cast<uintptr_t>(bytes) % uintptr_t(elem_bytes) == 0) {
      // Only read from: the mapping is PROT_READ, and copy_ never writes its source.
      source = torch::from_blob(const_cast<char*>(bytes), chunk.shape, options);
    } else {  // a file from another writer may leave a tensor unaligned
      source = torch::empty(chunk.shape, options);
      std::memcpy(source.data_ptr(), bytes, chunk.end - chunk.begin);
    }
    torch::Tensor target = result;
    for (size_t d = 0; d < chunk.shape.size(); ++d) {
      source = source.narrow(int64_t(d), piece.in_chunk[d], piece.global.shape[d]);
      target = target.narrow(int64_t(d), piece.in_want[d], piece.global.shape[d]);
    }
    target.copy_(source);
  }
  return result;
}

at::Tensor CheckpointReader::read(const std::string& key) {
  auto found = index_.tensors.find(key);
  if (found == index_.tensors.end()) fail(folder_, "no tensor \"" + key + "\" in this checkpoint");
  const auto& shape = found->second.shape;
  return read(key, Box{std::vector<int64_t>(shape.size(), 0), shape});
}

}  // namespace gt::ckpt

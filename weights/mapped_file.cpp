#include "weights/mapped_file.hpp"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include <torch/torch.h>

#include "common/error.hpp"

// The formats read through this are little-endian; so are the machines graphtune runs on, which
// lets it hand out views of the mapped bytes.
static_assert(__BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__, "mapped weights assume little-endian");

namespace gt {
namespace {

// Asks the kernel to reclaim the whole pages inside [ptr, ptr + n) (a tensor's bytes in the
// mapping; the pages at its ends may hold a neighbour's bytes too, and stay). Errors are
// ignored: this only saves memory. MADV_PAGEOUT only reclaims, it never discards: a page a
// caller wrote privately survives, and a kernel without it (before 5.4) keeps them.
void page_out(const void* ptr, uint64_t n) {
#ifdef MADV_PAGEOUT
  const uintptr_t page = static_cast<uintptr_t>(::sysconf(_SC_PAGESIZE));
  const uintptr_t begin = (reinterpret_cast<uintptr_t>(ptr) + page - 1) / page * page;
  const uintptr_t end = (reinterpret_cast<uintptr_t>(ptr) + n) / page * page;
  if (end > begin) ::madvise(reinterpret_cast<void*>(begin), end - begin, MADV_PAGEOUT);
#else
  (void)ptr, (void)n;
#endif
}

}  // namespace

std::shared_ptr<const MappedFile> MappedFile::open(const std::string& path) {
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) fail(path, std::string("cannot open: ") + std::strerror(errno));
  struct stat st;
  if (::fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
    ::close(fd);
    fail(path, "not a regular file");
  }
  std::shared_ptr<MappedFile> m(new MappedFile());
  m->path_ = path;
  m->size_ = static_cast<uint64_t>(st.st_size);
  if (m->size_ == 0) {
    ::close(fd);
    return m;
  }
  // Private and writable: tensors handed out are ordinary writable tensors, and a write lands
  // in a private copy of the page instead of the file (or a SIGSEGV on a read-only page).
  // MAP_NORESERVE: nothing is charged against memory unless a page is actually written.
  void* addr = ::mmap(nullptr, m->size_, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_NORESERVE, fd, 0);
  const int map_errno = errno;
  ::close(fd);
  if (addr == MAP_FAILED) fail(path, std::string("cannot map: ") + std::strerror(map_errno));
  m->addr_ = addr;
  return m;
}

MappedFile::~MappedFile() {
  if (addr_) ::munmap(addr_, size_);
}

torch::Tensor MappedFile::view(uint64_t offset, uint64_t nbytes, torch::IntArrayRef sizes, torch::ScalarType type) const {
  const auto opts = torch::TensorOptions().dtype(type);
  if (nbytes == 0) return torch::empty(sizes, opts);
  char* ptr = static_cast<char*>(addr_) + offset;
  if (reinterpret_cast<uintptr_t>(ptr) % c10::elementSize(type) != 0) {
    torch::Tensor t = torch::empty(sizes, opts);
    std::memcpy(t.data_ptr(), ptr, nbytes);
    return t;
  }
  std::shared_ptr<const MappedFile> keep = shared_from_this();
  return torch::from_blob(ptr, sizes, [keep, ptr, nbytes](void*) { page_out(ptr, nbytes); }, opts);
}

}  // namespace gt

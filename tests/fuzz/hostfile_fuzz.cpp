// Hostfiles (OpenMPI and DeepSpeed syntax) and DeepSpeed's --include/--exclude specs: reading,
// filtering and writing must end in the project's InputError or in hosts that the OpenMPI
// hostfile graphtune writes for mpirun describes exactly.
//
// The input is the hostfile; a line "#include SPEC" or "#exclude SPEC" (a comment to the
// hostfile parser) gives the filter, as --include/--exclude would.
#include <cstdint>
#include <cstring>
#include <sstream>
#include <string>

#include "common/error.hpp"
#include "launcher/hostfile.hpp"
#include "tests/fuzz/fuzz_check.hpp"

namespace {

std::string spec_after(const std::string& text, const std::string& marker) {
  std::istringstream lines(text);
  for (std::string line; std::getline(lines, line);)
    if (line.rfind(marker, 0) == 0) return line.substr(marker.size());
  return "";
}

void check_hosts(const gt::Hostfile& hf) {
  FUZZ_CHECK(!hf.hosts.empty(), "a hostfile without hosts");
  long total = 0;
  for (const gt::Host& h : hf.hosts) {
    FUZZ_CHECK(h.slots >= 1, "a host without slots");
    FUZZ_CHECK(h.slots <= gt::kMaxSlots && h.max_slots <= gt::kMaxSlots, "slots beyond their range accepted");
    FUZZ_CHECK(h.max_slots == 0 || h.max_slots >= h.slots, "max_slots below slots");
    FUZZ_CHECK(gt::device_ids(h).size() == static_cast<size_t>(h.slots), "device ids differ from slots");
    total += h.slots;
  }
  FUZZ_CHECK(total == hf.total_slots(), "total_slots is not the sum");
  gt::check_fits(hf, hf.total_slots(), "--np");  // every slot used: must fit
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string text(reinterpret_cast<const char*>(data), size);
  gt::Hostfile hf;
  try {
    hf = gt::read_hostfile_text(text, "fuzz-hosts");
  } catch (const gt::InputError& e) {
    FUZZ_CHECK(std::strchr(e.what(), '\n') == nullptr, "an error message spans lines");
    return 0;
  }
  check_hosts(hf);
  gt::Hostfile chosen;
  try {
    chosen = gt::filter_hosts(hf, spec_after(text, "#include "), spec_after(text, "#exclude "));
  } catch (const gt::InputError& e) {
    FUZZ_CHECK(std::strchr(e.what(), '\n') == nullptr, "an error message spans lines");
    return 0;
  }
  check_hosts(chosen);
  FUZZ_CHECK(chosen.total_slots() <= hf.total_slots(), "a filter added slots");
  // What mpirun gets must read back as the same hosts and slots.
  const gt::Hostfile written = gt::read_hostfile_text(gt::openmpi_hostfile_text(chosen), "fuzz-written");
  FUZZ_CHECK(written.hosts.size() == chosen.hosts.size(), "the written hostfile has other hosts");
  for (size_t i = 0; i < chosen.hosts.size(); ++i) {
    FUZZ_CHECK(written.hosts[i].name == chosen.hosts[i].name, "the written hostfile renamed a host");
    FUZZ_CHECK(written.hosts[i].slots == chosen.hosts[i].slots, "the written hostfile changed slots");
    FUZZ_CHECK(written.hosts[i].max_slots == chosen.hosts[i].max_slots, "the written hostfile changed max_slots");
  }
  return 0;
}

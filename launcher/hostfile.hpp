#pragma once
// Hostfiles: which machines a job runs on and how many ranks (GPUs) each takes. graphtune reads
// OpenMPI's syntax and DeepSpeed's (the same `host slots=N` lines; DeepSpeed insists on
// slots=), narrows the hosts with DeepSpeed's --include/--exclude, and writes the result as
// the OpenMPI hostfile it hands to mpirun. Torch-free: the launcher links it.
//
//   # comment                  blank lines and text after '#' are ignored
//   node-1                     one slot, as OpenMPI counts a bare host
//   node-2 slots=4             four ranks
//   node-3 slots=4 max_slots=8 OpenMPI's upper bound (max-slots= is accepted too)
//
// Every problem is a gt::InputError naming "FILE:LINE" and what is wrong.
#include <string>
#include <vector>

namespace gt {

// The most slots (and max_slots) a host may have: far above any machine; keeps the sums in an int.
inline constexpr int kMaxSlots = 1 << 20;

struct Host {
  std::string name;
  int slots = 1;
  int max_slots = 0;  // 0: not given
  int line = 0;       // where it is in the hostfile, for messages
  // The devices (slot indices, CUDA_VISIBLE_DEVICES numbers) this host's ranks use, when a
  // --include/--exclude slot list chose some; empty means 0..slots-1.
  std::vector<int> slot_ids;
};

struct Hostfile {
  // kDeepSpeed: every host has an explicit slots= and nothing else, so DeepSpeed's runner
  // reads the file too; kOpenMPI: it relies on OpenMPI-only syntax (bare hosts, max_slots).
  enum Format { kOpenMPI, kDeepSpeed };
  std::string path;
  std::vector<Host> hosts;
  Format format = kOpenMPI;
  int total_slots() const;
};

Hostfile read_hostfile(const std::string& path);
// The same from the file's text; `path` names it in errors and in Hostfile::path.
Hostfile read_hostfile_text(const std::string& text, const std::string& path);

// DeepSpeed's filters: "a@b:0,2" keeps host a whole and slots 0 and 2 of b (--include) or
// drops them (--exclude). At most one of the two may be non-empty; both empty returns hf.
Hostfile filter_hosts(const Hostfile& hf, const std::string& include, const std::string& exclude);

// The devices a host's ranks use: its slot_ids, or 0..slots-1.
std::vector<int> device_ids(const Host& host);

// The hostfile the launcher writes into the run folder for `mpirun --hostfile`. OpenMPI has no
// syntax for slot ids; they reach the ranks as CUDA_VISIBLE_DEVICES instead.
std::string openmpi_hostfile_text(const Hostfile& hf);

// np ranks must fit the slots: "--np 5: the hostfile FILE has 4 slots (a: 2, b: 2)", where
// `flag` ("--np") names the setting the user chose np with.
void check_fits(const Hostfile& hf, int np, const std::string& flag);

// localhost, 127.x.y.z, ::1, this machine's host name (full or short) or one of its addresses:
// ranks there need no remote shell.
bool is_local_host(const std::string& name);

}  // namespace gt

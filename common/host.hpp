#pragma once
// This machine, as messages name it.
#include <string>

namespace gt {

// gethostname(), or "this host" where it fails.
std::string this_host_name();

// ", CUDA_VISIBLE_DEVICES=..." when that variable is set, else "": what a message about the
// GPUs a process sees adds, since the variable decides what it sees.
std::string cuda_visible_devices_note();

}  // namespace gt

#include "launcher/hostfile.hpp"

#include <arpa/inet.h>
#include <ifaddrs.h>
#include <netinet/in.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <fstream>
#include <map>
#include <set>
#include <sstream>

#include "common/error.hpp"
#include "common/printable.hpp"

namespace gt {
namespace {


std::string trim(const std::string& s) {
  const size_t b = s.find_first_not_of(" \t\r");
  if (b == std::string::npos) return "";
  return s.substr(b, s.find_last_not_of(" \t\r") - b + 1);
}

// Every field, empty ones included: "a@@b" is three, "" is one (empty) field.
std::vector<std::string> split(const std::string& s, char sep) {
  std::vector<std::string> parts(1);
  for (char c : s) {
    if (c == sep)
      parts.emplace_back();
    else
      parts.back() += c;
  }
  return parts;
}

// Plain decimal digits only: "2.5", "+2", "2x" and overflow are all mistakes worth naming.
bool parse_count(const std::string& text, int& out) {
  if (text.empty() || text.size() > 9) return false;
  for (char c : text)
    if (c < '0' || c > '9') return false;
  out = std::stoi(text);
  return true;
}

// RFC 1123 names (letters, digits, '-', dot-separated labels) and IPv4 addresses, plus '_',
// which real clusters use though the RFC does not allow it. '@' and ':' would clash with the
// --include syntax, '=' means a keyword came first.
std::string hostname_problem(const std::string& name) {
  if (name.empty()) return "an empty host name";
  if (name.size() > 253) return "host name longer than 253 characters";
  for (char c : name) {
    const bool ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
                    c == '-' || c == '.' || c == '_';
    if (!ok)
      return "host name '" + name + "' has '" + std::string(1, c) +
             "', which a host name cannot contain (letters, digits, '-', '_', '.')";
  }
  for (const std::string& label : split(name, '.')) {
    if (label.empty()) return "host name '" + name + "' has an empty part between dots";
    if (label.front() == '-' || label.back() == '-')
      return "host name '" + name + "' has a part that starts or ends with '-'";
  }
  return "";
}

void parse_keyword(const std::string& where, const std::string& word, Host& host, bool& saw_slots) {
  const size_t eq = word.find('=');
  if (eq == std::string::npos)
    fail(where, "unexpected '" + word + "' after host '" + host.name +
                    "' (want slots=N or max_slots=N; a host name cannot contain spaces)");
  const std::string key = word.substr(0, eq), value = word.substr(eq + 1);
  int n = 0;
  if (key == "slots") {
    if (saw_slots) fail(where, "slots= is given twice for host '" + host.name + "'");
    if (!parse_count(value, n) || n < 1 || n > kMaxSlots)
      fail(where, "slots must be an integer from 1 to " + std::to_string(kMaxSlots) + ", got '" + value + "'");
    host.slots = n;
    saw_slots = true;
  } else if (key == "max_slots" || key == "max-slots") {
    if (host.max_slots != 0) fail(where, key + "= is given twice for host '" + host.name + "'");
    if (!parse_count(value, n) || n < 1 || n > kMaxSlots)
      fail(where, key + " must be an integer from 1 to " + std::to_string(kMaxSlots) + ", got '" + value + "'");
    host.max_slots = n;
  } else {
    fail(where, "unknown keyword '" + key + "' (a hostfile line is: HOST [slots=N] [max_slots=M])");
  }
}

std::string host_names(const Hostfile& hf) {
  std::string names;
  for (const Host& h : hf.hosts) names += (names.empty() ? "" : ", ") + h.name;
  return names;
}

std::string slots_by_host(const Hostfile& hf) {
  std::string s;
  for (const Host& h : hf.hosts) s += (s.empty() ? "" : ", ") + h.name + ": " + std::to_string(h.slots);
  return s;
}

// "0..3" for a host's full range, "1, 3" once a filter picked some.
std::string describe_ids(const std::vector<int>& ids) {
  bool full_range = true;
  for (size_t i = 0; i < ids.size(); ++i) full_range = full_range && ids[i] == static_cast<int>(i);
  if (full_range && ids.size() > 1) return "0.." + std::to_string(ids.size() - 1);
  std::string s;
  for (int id : ids) s += (s.empty() ? "" : ", ") + std::to_string(id);
  return s;
}

// One "--include" entry, "host" or "host:0,2": the host's index in hf and the chosen devices
// (empty: the whole host).
struct FilterEntry {
  size_t host = 0;
  std::vector<int> devices;
};

std::vector<FilterEntry> parse_filter(const Hostfile& hf, const std::string& flag, const std::string& spec) {
  std::vector<FilterEntry> entries;
  std::set<size_t> seen;
  for (const std::string& raw : split(spec, '@')) {
    const std::string entry = trim(raw);
    if (entry.empty()) fail(flag, "empty host in '" + spec + "' (hosts are separated by one '@')");
    const size_t colon = entry.find(':');
    const std::string name = entry.substr(0, colon);
    size_t index = 0;
    while (index < hf.hosts.size() && hf.hosts[index].name != name) ++index;
    if (index == hf.hosts.size())
      fail(flag, "unknown host '" + name + "' (the hostfile has " + host_names(hf) + ")");
    if (!seen.insert(index).second) fail(flag, "host '" + name + "' is named twice in '" + spec + "'");
    FilterEntry fe{index, {}};
    if (colon != std::string::npos) {
      const std::vector<int> have = device_ids(hf.hosts[index]);
      for (const std::string& slot : split(entry.substr(colon + 1), ',')) {
        int id = 0;
        if (!parse_count(trim(slot), id))
          fail(flag, "host '" + name + "': slot '" + slot + "' is not a slot index (want e.g. " + name + ":0,1)");
        if (std::find(have.begin(), have.end(), id) == have.end())
          fail(flag, "host '" + name + "' has no slot " + std::to_string(id) + " (it has slots " +
                         describe_ids(have) + ")");
        if (std::find(fe.devices.begin(), fe.devices.end(), id) != fe.devices.end())
          fail(flag, "host '" + name + "': slot " + std::to_string(id) + " is named twice");
        fe.devices.push_back(id);
      }
      std::sort(fe.devices.begin(), fe.devices.end());
    }
    entries.push_back(fe);
  }
  return entries;
}

// A host narrowed to some of its devices. max_slots is pinned to the new count so that mpirun
// cannot oversubscribe ranks onto a GPU the user left out.
Host with_devices(const Host& h, const std::vector<int>& devices) {
  Host out = h;
  out.slot_ids = devices;
  out.slots = static_cast<int>(devices.size());
  out.max_slots = out.slots;
  return out;
}

}  // namespace

int Hostfile::total_slots() const {
  int total = 0;
  for (const Host& h : hosts) total += h.slots;
  return total;
}

std::vector<int> device_ids(const Host& host) {
  if (!host.slot_ids.empty()) return host.slot_ids;
  std::vector<int> ids(host.slots);
  for (int i = 0; i < host.slots; ++i) ids[i] = i;
  return ids;
}

Hostfile read_hostfile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) fail(path, std::string("cannot read the hostfile (") + std::strerror(errno) + ")");
  // Line by line because getline reports a read error (a directory: EISDIR) as bad(), which
  // copying the stream buffer would not.
  std::string text;
  for (std::string line; std::getline(in, line);) text += line + '\n';
  if (in.bad()) fail(path, std::string("cannot read the hostfile (") + std::strerror(errno) + ")");
  return read_hostfile_text(text, path);
}

namespace {
Hostfile parse_hostfile(const std::string& file_text, const std::string& path);
}  // namespace

Hostfile read_hostfile_text(const std::string& file_text, const std::string& path) {
  // The messages quote the file's words; a damaged file's bytes (an ESC that clears the
  // terminal, a CR) are shown escaped.
  try {
    return parse_hostfile(file_text, path);
  } catch (const InputError& e) {
    throw InputError("", printable(e.what()));
  }
}

namespace {
Hostfile parse_hostfile(const std::string& file_text, const std::string& path) {
  std::istringstream in(file_text);
  Hostfile hf;
  hf.path = path;
  bool deepspeed_compatible = true;
  std::map<std::string, int> first_line;
  std::string text;
  for (int number = 1; std::getline(in, text); ++number) {
    const std::string where = path + ":" + std::to_string(number);
    const std::string content = trim(text.substr(0, text.find('#')));
    if (content.empty()) continue;
    std::istringstream words(content);
    Host host;
    host.line = number;
    words >> host.name;
    if (host.name.find('=') != std::string::npos)
      fail(where, "the line starts with '" + host.name + "'; the host name comes first");
    const std::string problem = hostname_problem(host.name);
    if (!problem.empty()) fail(where, problem);
    bool saw_slots = false;
    for (std::string word; words >> word;) parse_keyword(where, word, host, saw_slots);
    if (host.max_slots != 0 && host.max_slots < host.slots)
      fail(where, "max_slots=" + std::to_string(host.max_slots) + " is less than slots=" +
                      std::to_string(host.slots) + " for host '" + host.name + "'");
    // OpenMPI would add the two lines' slots together; a repeated line is far more often a
    // copy-paste slip than a wish, so it is named instead.
    const auto [it, fresh] = first_line.emplace(host.name, number);
    if (!fresh)
      fail(where, "host '" + host.name + "' is already on line " + std::to_string(it->second));
    deepspeed_compatible = deepspeed_compatible && saw_slots && host.max_slots == 0;
    hf.hosts.push_back(host);
  }
  if (hf.hosts.empty()) fail(path, "the hostfile names no hosts (every line is blank or a comment)");
  hf.format = deepspeed_compatible ? Hostfile::kDeepSpeed : Hostfile::kOpenMPI;
  return hf;
}
}  // namespace

Hostfile filter_hosts(const Hostfile& hf, const std::string& include, const std::string& exclude) {
  if (!include.empty() && !exclude.empty())
    fail("--include/--exclude", "give one of them, not both (DeepSpeed does not allow both either)");
  if (include.empty() && exclude.empty()) return hf;
  Hostfile out = hf;
  out.hosts.clear();
  if (!include.empty()) {
    std::vector<FilterEntry> entries = parse_filter(hf, "--include", include);
    // Hostfile order, not the order of the flag: rank numbering follows the hostfile.
    std::sort(entries.begin(), entries.end(), [](auto& a, auto& b) { return a.host < b.host; });
    for (const FilterEntry& e : entries) {
      const Host& h = hf.hosts[e.host];
      out.hosts.push_back(e.devices.empty() ? h : with_devices(h, e.devices));
    }
    return out;
  }
  const std::vector<FilterEntry> entries = parse_filter(hf, "--exclude", exclude);
  for (size_t i = 0; i < hf.hosts.size(); ++i) {
    const Host& h = hf.hosts[i];
    auto e = std::find_if(entries.begin(), entries.end(), [&](auto& fe) { return fe.host == i; });
    if (e == entries.end()) {
      out.hosts.push_back(h);
    } else if (!e->devices.empty()) {
      std::vector<int> kept;
      for (int id : device_ids(h))
        if (std::find(e->devices.begin(), e->devices.end(), id) == e->devices.end()) kept.push_back(id);
      if (!kept.empty()) out.hosts.push_back(with_devices(h, kept));
    }
  }
  if (out.hosts.empty()) fail("--exclude", "'" + exclude + "' leaves no slots in " + hf.path);
  return out;
}

std::string openmpi_hostfile_text(const Hostfile& hf) {
  std::string text = "# written by graphtune from " + hf.path + "\n";
  for (const Host& h : hf.hosts) {
    text += h.name + " slots=" + std::to_string(h.slots);
    if (h.max_slots != 0) text += " max_slots=" + std::to_string(h.max_slots);
    text += "\n";
  }
  return text;
}

void check_fits(const Hostfile& hf, int np, const std::string& flag) {
  const std::string where = flag + " " + std::to_string(np);
  if (np < 1) fail(where, "a job needs at least 1 rank");
  const int total = hf.total_slots();
  if (np > total)
    fail(where, "the hostfile " + hf.path + " has " + std::to_string(total) + " slot" + (total == 1 ? "" : "s") +
                    " (" + slots_by_host(hf) + ")");
}

bool is_local_host(const std::string& name) {
  if (name == "localhost" || name == "localhost.localdomain" || name == "::1") return true;
  in_addr v4{};
  if (inet_pton(AF_INET, name.c_str(), &v4) == 1 && (ntohl(v4.s_addr) >> 24) == 127) return true;
  char own[256] = {};
  if (gethostname(own, sizeof own - 1) == 0) {
    const std::string full = own, short_name = full.substr(0, full.find('.'));
    if (name == full || name == short_name || name.substr(0, name.find('.')) == full) return true;
  }
  // An address of one of this machine's interfaces (what `hostname -i` prints).
  ifaddrs* list = nullptr;
  if (getifaddrs(&list) != 0) return false;
  bool found = false;
  for (ifaddrs* a = list; a != nullptr && !found; a = a->ifa_next) {
    if (a->ifa_addr == nullptr) continue;
    char text[INET6_ADDRSTRLEN] = {};
    const int family = a->ifa_addr->sa_family;
    const void* addr = nullptr;
    if (family == AF_INET) addr = &reinterpret_cast<sockaddr_in*>(a->ifa_addr)->sin_addr;
    if (family == AF_INET6) addr = &reinterpret_cast<sockaddr_in6*>(a->ifa_addr)->sin6_addr;
    if (addr != nullptr && inet_ntop(family, addr, text, sizeof text) != nullptr) found = name == text;
  }
  freeifaddrs(list);
  return found;
}

}  // namespace gt

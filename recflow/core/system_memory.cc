#include "recflow/core/system_memory.h"

#include <unistd.h>

#include <algorithm>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"

namespace recflow {
namespace {

// The number in a cgroup limit file; 0 for "max", a missing file or junk.
int64_t ReadLimit(Env* env, const std::string& path) {
  std::string text;
  if (!ReadFileToString(env, path, &text, 4096).ok()) return 0;
  int64_t v = 0;
  if (!absl::SimpleAtoi(absl::StripAsciiWhitespace(text), &v) || v <= 0) return 0;
  return v;
}

}  // namespace

int64_t PhysicalMemoryBytes(Env* env) {
  int64_t bytes = 0;
  const long pages = sysconf(_SC_PHYS_PAGES);
  const long page_size = sysconf(_SC_PAGESIZE);
  if (pages > 0 && page_size > 0 && pages <= INT64_MAX / page_size) {
    bytes = static_cast<int64_t>(pages) * page_size;
  }
  // The cgroup limits: /proc/self/cgroup names the process's groups
  // ("0::/path" for v2, "N:memory:/path" for v1); the root's file covers a
  // container that sees only its own group.
  std::vector<std::string> files = {"/sys/fs/cgroup/memory.max",
                                    "/sys/fs/cgroup/memory/memory.limit_in_bytes"};
  std::string groups;
  if (ReadFileToString(env, "/proc/self/cgroup", &groups, 1 << 16).ok()) {
    for (absl::string_view line : absl::StrSplit(groups, '\n', absl::SkipEmpty())) {
      std::vector<absl::string_view> f = absl::StrSplit(line, absl::MaxSplits(':', 2));
      if (f.size() != 3 || f[2].empty() || f[2] == "/") continue;
      if (f[0] == "0" && f[1].empty()) {
        files.push_back(absl::StrCat("/sys/fs/cgroup", f[2], "/memory.max"));
      } else if (absl::StrContains(f[1], "memory")) {
        files.push_back(absl::StrCat("/sys/fs/cgroup/memory", f[2], "/memory.limit_in_bytes"));
      }
    }
  }
  for (const std::string& file : files) {
    const int64_t limit = ReadLimit(env, file);
    if (limit > 0 && (bytes == 0 || limit < bytes)) bytes = limit;
  }
  return bytes;
}

std::string HumanBytes(double bytes) {
  const char* units[] = {"bytes", "KB", "MB", "GB", "TB", "PB", "EB"};
  int u = 0;
  while (bytes >= 1000 && u < 6) {
    bytes /= 1000;
    ++u;
  }
  return u == 0 ? absl::StrFormat("%.0f bytes", bytes) : absl::StrFormat("%.1f %s", bytes, units[u]);
}

}  // namespace recflow

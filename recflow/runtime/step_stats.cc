#include "recflow/runtime/step_stats.h"

#include <pthread.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <set>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"

namespace recflow {
namespace {

// Escapes a string for a JSON string literal.
std::string JsonEscape(absl::string_view s) {
  std::string out;
  out.reserve(s.size() + 2);
  for (unsigned char c : s) {
    switch (c) {
      case '"': out += "\\\""; break;
      case '\\': out += "\\\\"; break;
      case '\n': out += "\\n"; break;
      case '\t': out += "\\t"; break;
      default:
        if (c < 0x20) {
          out += absl::StrFormat("\\u%04x", c);
        } else {
          out.push_back(static_cast<char>(c));
        }
    }
  }
  return out;
}

}  // namespace

void StepStatsCollector::Record(NodeExecStats stats) {
  MutexLock lock(&mu_);
  nodes_.push_back(std::move(stats));
}

StepStats StepStatsCollector::Take(int64_t step_id) {
  MutexLock lock(&mu_);
  StepStats s;
  s.step_id = step_id;
  s.nodes.swap(nodes_);
  return s;
}

int64_t NowMicrosForStats() {
  return std::chrono::duration_cast<std::chrono::microseconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

int CurrentThreadIdForStats() {
  static std::atomic<int> next{1};
  thread_local int id = next.fetch_add(1);
  return id;
}

const std::string& CurrentThreadNameForStats() {
  thread_local std::string name = [] {
    char buf[32] = {0};
    pthread_getname_np(pthread_self(), buf, sizeof(buf));
    return std::string(buf);
  }();
  return name;
}

std::string StepStatsToChromeTrace(const StepStats& stats,
                                   absl::string_view process_name) {
  int64_t origin = 0;
  if (!stats.nodes.empty()) {
    origin = stats.nodes[0].start_micros;
    for (const NodeExecStats& n : stats.nodes) origin = std::min(origin, n.start_micros);
  }
  std::string out = "{\"displayTimeUnit\": \"ms\", \"traceEvents\": [\n";
  absl::StrAppend(&out,
                  "{\"name\": \"process_name\", \"ph\": \"M\", \"pid\": 1, "
                  "\"args\": {\"name\": \"",
                  JsonEscape(process_name), " step ", stats.step_id, "\"}}");
  std::set<int> named;
  for (const NodeExecStats& n : stats.nodes) {
    if (!named.insert(n.thread_id).second) continue;
    const std::string name =
        n.thread_name.empty() ? absl::StrCat("thread ", n.thread_id)
                              : absl::StrCat(n.thread_name, " (", n.thread_id, ")");
    absl::StrAppend(&out,
                    ",\n{\"name\": \"thread_name\", \"ph\": \"M\", \"pid\": 1, "
                    "\"tid\": ",
                    n.thread_id, ", \"args\": {\"name\": \"", JsonEscape(name), "\"}}");
  }
  for (const NodeExecStats& n : stats.nodes) {
    absl::StrAppend(&out, ",\n{\"name\": \"", JsonEscape(n.node_name),
                    "\", \"cat\": \"", JsonEscape(n.op),
                    "\", \"ph\": \"X\", \"pid\": 1, \"tid\": ", n.thread_id,
                    ", \"ts\": ", n.start_micros - origin,
                    ", \"dur\": ", std::max<int64_t>(0, n.end_micros - n.start_micros),
                    ", \"args\": {\"op\": \"", JsonEscape(n.op), "\"}}");
  }
  out += "\n]}\n";
  return out;
}

}  // namespace recflow

#include "recflow/runtime/step_stats.h"

#include <pthread.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <set>

#include "absl/strings/str_cat.h"
#include "recflow/core/json_writer.h"

namespace recflow {
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
  // One event per line, unindented.
  std::string out;
  JsonWriter w(&out, {.indent = 0});
  w.BeginObject().Key("displayTimeUnit").String("ms");
  w.Key("traceEvents").BeginArray(JsonWriter::Layout::kMultiline);
  w.BeginObject().Key("name").String("process_name").Key("ph").String("M");
  w.Key("pid").Int(1).Key("args").BeginObject();
  w.Key("name").String(absl::StrCat(process_name, " step ", stats.step_id));
  w.EndObject().EndObject();
  std::set<int> named;
  for (const NodeExecStats& n : stats.nodes) {
    if (!named.insert(n.thread_id).second) continue;
    const std::string name =
        n.thread_name.empty() ? absl::StrCat("thread ", n.thread_id)
                              : absl::StrCat(n.thread_name, " (", n.thread_id, ")");
    w.BeginObject().Key("name").String("thread_name").Key("ph").String("M");
    w.Key("pid").Int(1).Key("tid").Int(n.thread_id);
    w.Key("args").BeginObject().Key("name").String(name).EndObject().EndObject();
  }
  for (const NodeExecStats& n : stats.nodes) {
    w.BeginObject().Key("name").String(n.node_name).Key("cat").String(n.op);
    w.Key("ph").String("X").Key("pid").Int(1).Key("tid").Int(n.thread_id);
    w.Key("ts").Int(n.start_micros - origin);
    w.Key("dur").Int(std::max<int64_t>(0, n.end_micros - n.start_micros));
    w.Key("args").BeginObject().Key("op").String(n.op).EndObject().EndObject();
  }
  w.EndArray().EndObject();
  out += "\n";
  return out;
}

}  // namespace recflow

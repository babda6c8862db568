#include "recflow/distributed/cluster_spec.h"

#include <cstdlib>
#include <set>
#include <utility>

#include "absl/strings/ascii.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "rapidjson/document.h"
#include "rapidjson/error/en.h"
#include "recflow/core/json_writer.h"
#include "recflow/core/status.h"

namespace recflow::distributed {
namespace {

bool IsNameChar(char c) {
  return absl::ascii_isalnum(static_cast<unsigned char>(c)) || c == '_' ||
         c == '-';
}

bool IsHostChar(char c) { return IsNameChar(c) || c == '.'; }

// A non-negative decimal integer that fits an int (no sign, no spaces).
bool ParseIndex(absl::string_view s, int* out) {
  if (s.empty() || s.size() > 9) return false;
  for (char c : s) {
    if (!absl::ascii_isdigit(static_cast<unsigned char>(c))) return false;
  }
  return absl::SimpleAtoi(s, out);
}

// OK when `address` is "host:port" (host a name, IPv4 or "[IPv6]"; port
// 1..65535); otherwise an InvalidArgument saying what is wrong (without
// context).
absl::Status CheckAddress(absl::string_view address) {
  absl::string_view host, port;
  if (absl::StartsWith(address, "[")) {
    const size_t close = address.find(']');
    if (close == absl::string_view::npos) {
      return errors::InvalidArgument("address '", address,
                                     "' has an unterminated '[' (expected [IPv6]:port)");
    }
    host = address.substr(1, close - 1);
    absl::string_view rest = address.substr(close + 1);
    if (!absl::ConsumePrefix(&rest, ":")) {
      return errors::InvalidArgument("address '", address,
                                     "' has no port (expected host:port)");
    }
    port = rest;
    for (char c : host) {
      if (!absl::ascii_isxdigit(static_cast<unsigned char>(c)) && c != ':' && c != '.') {
        return errors::InvalidArgument("address '", address, "' has a bad IPv6 host '",
                                       host, "'");
      }
    }
  } else {
    const size_t colon = address.rfind(':');
    if (colon == absl::string_view::npos) {
      return errors::InvalidArgument("address '", address,
                                     "' has no port (expected host:port)");
    }
    host = address.substr(0, colon);
    port = address.substr(colon + 1);
    for (char c : host) {
      if (!IsHostChar(c)) {
        return errors::InvalidArgument(
            "address '", address, "' has a bad host '", host,
            "' (expected a name or an IPv4 address; write IPv6 as [addr]:port)");
      }
    }
  }
  if (host.empty()) {
    return errors::InvalidArgument("address '", address, "' has an empty host");
  }
  int p = 0;
  if (!ParseIndex(port, &p) || p < 1 || p > 65535) {
    return errors::InvalidArgument("address '", address, "' has a bad port '", port,
                                   "' (expected 1..65535)");
  }
  return absl::OkStatus();
}

std::string Quote(absl::string_view s) { return absl::StrCat("\"", s, "\""); }

// A JSON value's kind, for messages.
const char* KindName(const rapidjson::Value& v) {
  switch (v.GetType()) {
    case rapidjson::kNullType:
      return "null";
    case rapidjson::kFalseType:
    case rapidjson::kTrueType:
      return "a boolean";
    case rapidjson::kObjectType:
      return "an object";
    case rapidjson::kArrayType:
      return "a list";
    case rapidjson::kStringType:
      return "a string";
    case rapidjson::kNumberType:
      return "a number";
  }
  return "?";
}

absl::string_view View(const rapidjson::Value& v) {
  return absl::string_view(v.GetString(), v.GetStringLength());
}

// One job of TF_CONFIG's "cluster": a list of strings, or a dict with keys
// "0".."n-1".
absl::StatusOr<std::vector<std::string>> ParseJob(absl::string_view job,
                                                  const rapidjson::Value& v) {
  std::vector<std::string> out;
  if (v.IsArray()) {
    for (rapidjson::SizeType i = 0; i < v.Size(); ++i) {
      if (!v[i].IsString()) {
        return errors::InvalidArgument("TF_CONFIG: cluster job ", Quote(job), " task ", i,
                                       " is ", KindName(v[i]),
                                       "; a job must be a list of \"host:port\" strings");
      }
      out.emplace_back(View(v[i]));
    }
    return out;
  }
  if (v.IsObject()) {
    std::map<int, std::string> by_index;
    for (auto it = v.MemberBegin(); it != v.MemberEnd(); ++it) {
      const absl::string_view key = View(it->name);
      int index = 0;
      if (!ParseIndex(key, &index)) {
        return errors::InvalidArgument("TF_CONFIG: cluster job ", Quote(job),
                                       " is a dict with key ", Quote(key),
                                       "; its keys must be task indices \"0\", \"1\", ...");
      }
      if (!it->value.IsString()) {
        return errors::InvalidArgument("TF_CONFIG: cluster job ", Quote(job), " task ", key,
                                       " is ", KindName(it->value),
                                       "; it must be a \"host:port\" string");
      }
      if (!by_index.emplace(index, std::string(View(it->value))).second) {
        return errors::InvalidArgument("TF_CONFIG: cluster job ", Quote(job),
                                       " names task ", index, " twice");
      }
    }
    int expected = 0;
    for (auto& [index, address] : by_index) {
      if (index != expected) {
        return errors::InvalidArgument("TF_CONFIG: cluster job ", Quote(job),
                                       " is a dict without task ", expected,
                                       "; its task indices must be 0..n-1");
      }
      ++expected;
      out.push_back(std::move(address));
    }
    return out;
  }
  return errors::InvalidArgument("TF_CONFIG: cluster job ", Quote(job), " is ", KindName(v),
                                 "; a job must be a list of \"host:port\" strings");
}

absl::StatusOr<TaskId> ParseTask(const rapidjson::Value& v) {
  if (!v.IsObject()) {
    return errors::InvalidArgument("TF_CONFIG: \"task\" is ", KindName(v),
                                   "; expected {\"type\": \"worker\", \"index\": 0}");
  }
  TaskId task;
  auto type = v.FindMember("type");
  if (type == v.MemberEnd()) {
    return errors::InvalidArgument("TF_CONFIG: \"task\" has no \"type\"");
  }
  if (!type->value.IsString() || type->value.GetStringLength() == 0) {
    return errors::InvalidArgument("TF_CONFIG: task \"type\" is ",
                                   type->value.IsString() ? "empty" : KindName(type->value),
                                   "; expected a job name such as \"worker\"");
  }
  task.job = std::string(View(type->value));
  auto index = v.FindMember("index");
  if (index == v.MemberEnd()) {
    return errors::InvalidArgument("TF_CONFIG: \"task\" has no \"index\"");
  }
  const rapidjson::Value& iv = index->value;
  if (iv.IsInt() && iv.GetInt() >= 0) {
    task.index = iv.GetInt();
  } else if (!(iv.IsString() && ParseIndex(View(iv), &task.index))) {
    const std::string shown = iv.IsString() ? Quote(View(iv))
                              : iv.IsInt()  ? absl::StrCat(iv.GetInt())
                              : iv.IsNumber() ? "a number that is not an int"
                                              : KindName(iv);
    return errors::InvalidArgument("TF_CONFIG: task \"index\" is ", shown,
                                   "; expected a non-negative integer");
  }
  return task;
}

// The task must be in the cluster (an evaluator may be outside it).
absl::Status CheckTask(const ClusterSpec& cluster, const TaskId& task,
                       absl::string_view source) {
  if (!cluster.HasJob(task.job)) {
    if (task.job == kEvaluatorJob) return absl::OkStatus();
    std::vector<std::string> jobs;
    for (const auto& [job, unused] : cluster.jobs()) jobs.push_back(job);
    return errors::InvalidArgument(source, ": task type ", Quote(task.job),
                                   " is not a job of the cluster; its jobs are: ",
                                   absl::StrJoin(jobs, ", "));
  }
  const int n = cluster.NumTasks(task.job);
  if (task.index >= n) {
    return errors::InvalidArgument(source, ": task index ", task.index, " is out of range: job ",
                                   Quote(task.job), " has ", n, n == 1 ? " task" : " tasks",
                                   " (indices 0..", n - 1, ")");
  }
  return absl::OkStatus();
}

std::vector<std::string> SplitHosts(absl::string_view hosts) {
  std::vector<std::string> out;
  for (absl::string_view h : absl::StrSplit(hosts, ',')) {
    h = absl::StripAsciiWhitespace(h);
    if (!h.empty()) out.emplace_back(h);
  }
  return out;
}

// TF_CONFIG (and the cluster in launch's messages) is written without
// spaces, one line for an environment variable.
constexpr JsonWriter::Options kCompact = {.style = JsonWriter::Style::kCompact};

void WriteJobs(const ClusterSpec::JobMap& jobs, JsonWriter* w) {
  w->BeginObject();
  for (const auto& [job, addresses] : jobs) {
    w->Key(job).BeginArray();
    for (const std::string& a : addresses) w->String(a);
    w->EndArray();
  }
  w->EndObject();
}

}  // namespace

std::string DeviceName(const TaskId& task) {
  return absl::StrCat("/job:", task.job, "/task:", task.index);
}

std::string DeviceNameSpec::ToString() const {
  std::string s;
  if (job) absl::StrAppend(&s, "/job:", *job);
  if (replica) absl::StrAppend(&s, "/replica:", *replica);
  if (task) absl::StrAppend(&s, "/task:", *task);
  if (type) {
    absl::StrAppend(&s, "/device:", *type);
    if (id) absl::StrAppend(&s, ":", *id);
  }
  return s;
}

absl::StatusOr<DeviceNameSpec> ParseDeviceName(absl::string_view device) {
  DeviceNameSpec spec;
  if (device.empty()) return spec;
  auto bad = [&](absl::string_view part, absl::string_view why) {
    return errors::InvalidArgument(
        "bad device name '", device, "': ", part.empty() ? "" : absl::StrCat("'", part, "' "),
        why, " (expected e.g. /job:ps/task:0 or /job:worker/replica:0/task:1/device:CPU:0)");
  };
  if (device[0] != '/') return bad("", "does not start with '/'");
  int last_rank = -1;
  const std::vector<absl::string_view> parts =
      absl::StrSplit(device.substr(1), '/');
  for (absl::string_view part : parts) {
    int rank = 0;
    absl::string_view rest = part;
    if (absl::ConsumePrefix(&rest, "job:")) {
      rank = 0;
      if (rest.empty()) return bad(part, "has an empty job name");
      for (char c : rest) {
        if (!IsNameChar(c)) return bad(part, "has a bad job name");
      }
      spec.job = std::string(rest);
    } else if (absl::ConsumePrefix(&rest, "replica:")) {
      rank = 1;
      int r = 0;
      if (!ParseIndex(rest, &r)) return bad(part, "needs a non-negative replica number");
      spec.replica = r;
    } else if (absl::ConsumePrefix(&rest, "task:")) {
      rank = 2;
      int t = 0;
      if (!ParseIndex(rest, &t)) return bad(part, "needs a non-negative task number");
      spec.task = t;
    } else {
      rank = 3;
      // "device:TYPE:N", "device:TYPE", or the legacy "cpu:N" / "gpu:N".
      const bool full = absl::ConsumePrefix(&rest, "device:");
      const std::vector<absl::string_view> fields = absl::StrSplit(rest, ':');
      if (fields.empty() || fields.size() > 2 || fields[0].empty()) {
        return bad(part, "is not job:, replica:, task: or device:TYPE:N");
      }
      std::string type = absl::AsciiStrToUpper(fields[0]);
      for (char c : type) {
        if (!absl::ascii_isalpha(static_cast<unsigned char>(c)) && c != '_') {
          return bad(part, "is not job:, replica:, task: or device:TYPE:N");
        }
      }
      if (!full && type != "CPU" && type != "GPU") {
        return bad(part, "is not job:, replica:, task: or device:TYPE:N");
      }
      if (!full && fields.size() != 2) return bad(part, "needs a device number");
      if (fields.size() == 2) {
        int id = 0;
        if (!ParseIndex(fields[1], &id)) return bad(part, "needs a non-negative device number");
        spec.id = id;
      }
      spec.type = std::move(type);
    }
    if (rank <= last_rank) {
      return bad(part, "is out of order or repeated (the order is job, replica, task, device)");
    }
    last_rank = rank;
  }
  return spec;
}

absl::StatusOr<ClusterSpec> ClusterSpec::Create(JobMap jobs) {
  ClusterSpec spec;
  std::map<std::string, std::string> seen;  // address -> "job 'ps' task 0"
  for (auto& [job, addresses] : jobs) {
    if (job.empty()) return errors::InvalidArgument("cluster has a job with an empty name");
    for (char c : job) {
      if (!IsNameChar(c)) {
        return errors::InvalidArgument("cluster job name ", Quote(job),
                                       " has a character other than [A-Za-z0-9_-]");
      }
    }
    for (size_t i = 0; i < addresses.size(); ++i) {
      const std::string who = absl::StrCat("job ", Quote(job), " task ", i);
      RETURN_IF_ERROR(errors::Annotate(CheckAddress(addresses[i]), who));
      auto [it, inserted] = seen.emplace(addresses[i], who);
      if (!inserted) {
        return errors::InvalidArgument(who, ": duplicate address '", addresses[i],
                                       "' (also ", it->second,
                                       "); every task needs its own host:port");
      }
    }
    if (!addresses.empty()) spec.jobs_.emplace(job, std::move(addresses));
  }
  return spec;
}

absl::StatusOr<ClusterConfig> ClusterSpec::FromTfConfig(absl::string_view json) {
  rapidjson::Document doc;
  doc.Parse<rapidjson::kParseIterativeFlag | rapidjson::kParseValidateEncodingFlag>(
      json.data(), json.size());
  if (doc.HasParseError()) {
    return errors::InvalidArgument("TF_CONFIG is not valid JSON: ",
                                   rapidjson::GetParseError_En(doc.GetParseError()),
                                   " at offset ", doc.GetErrorOffset());
  }
  if (!doc.IsObject()) {
    return errors::InvalidArgument("TF_CONFIG is ", KindName(doc),
                                   "; expected an object {\"cluster\": {...}, \"task\": {...}}");
  }
  auto cluster = doc.FindMember("cluster");
  if (cluster == doc.MemberEnd()) {
    return errors::InvalidArgument("TF_CONFIG has no \"cluster\"");
  }
  if (!cluster->value.IsObject()) {
    return errors::InvalidArgument("TF_CONFIG: \"cluster\" is ", KindName(cluster->value),
                                   "; expected an object {\"worker\": [\"host:port\", ...], ...}");
  }
  JobMap jobs;
  for (auto it = cluster->value.MemberBegin(); it != cluster->value.MemberEnd(); ++it) {
    const std::string job(View(it->name));
    if (jobs.count(job) != 0) {
      return errors::InvalidArgument("TF_CONFIG: cluster job ", Quote(job), " appears twice");
    }
    ASSIGN_OR_RETURN(jobs[job], ParseJob(job, it->value));
  }
  auto created = ClusterSpec::Create(std::move(jobs));
  if (!created.ok()) return errors::Annotate(created.status(), "TF_CONFIG: cluster");
  ClusterSpec spec = *std::move(created);
  if (spec.jobs().empty()) {
    return errors::InvalidArgument("TF_CONFIG: \"cluster\" has no tasks");
  }
  auto task = doc.FindMember("task");
  if (task == doc.MemberEnd()) {
    return errors::InvalidArgument("TF_CONFIG has no \"task\" (expected \"task\": {\"type\": "
                                   "\"worker\", \"index\": 0})");
  }
  ClusterConfig config;
  ASSIGN_OR_RETURN(config.task, ParseTask(task->value));
  RETURN_IF_ERROR(CheckTask(spec, config.task, "TF_CONFIG"));
  config.cluster = std::move(spec);
  return config;
}

absl::StatusOr<ClusterConfig> ClusterSpec::FromEnv() {
  const char* value = std::getenv("TF_CONFIG");
  if (value == nullptr || *value == '\0') {
    return errors::NotFound("the TF_CONFIG environment variable is not set");
  }
  return FromTfConfig(value);
}

absl::StatusOr<ClusterConfig> ClusterSpec::FromFlags(absl::string_view ps_hosts,
                                                     absl::string_view worker_hosts,
                                                     absl::string_view chief_host,
                                                     absl::string_view job_name,
                                                     int task_index) {
  JobMap jobs;
  const std::pair<const char*, absl::string_view> flags[] = {
      {"ps", ps_hosts}, {"worker", worker_hosts}, {"chief", chief_host}};
  for (const auto& [job, hosts] : flags) {
    std::vector<std::string> list = SplitHosts(hosts);
    if (std::string(job) == kChiefJob && list.size() > 1) {
      return errors::InvalidArgument("--chief_host: one chief address expected, got ",
                                     list.size(), " ('", chief_host, "')");
    }
    const std::string flag =
        std::string(job) == kChiefJob ? "--chief_host" : absl::StrCat("--", job, "_hosts");
    // Each flag alone first, so that a bad address names its flag.
    RETURN_IF_ERROR(errors::Annotate(ClusterSpec::Create({{job, list}}).status(), flag));
    jobs[job] = std::move(list);
  }
  ASSIGN_OR_RETURN(ClusterSpec spec, ClusterSpec::Create(std::move(jobs)));
  if (spec.jobs().empty()) {
    return errors::InvalidArgument("--ps_hosts, --worker_hosts and --chief_host are all empty");
  }
  if (job_name.empty()) return errors::InvalidArgument("--job_name is empty");
  if (task_index < 0) {
    return errors::InvalidArgument("--task_index is ", task_index, "; must be >= 0");
  }
  ClusterConfig config;
  config.task = TaskId{std::string(job_name), task_index};
  RETURN_IF_ERROR(CheckTask(spec, config.task, "--job_name/--task_index"));
  config.cluster = std::move(spec);
  return config;
}

bool ClusterSpec::HasJob(absl::string_view job) const {
  return jobs_.find(std::string(job)) != jobs_.end();
}

int ClusterSpec::NumTasks(absl::string_view job) const {
  auto it = jobs_.find(std::string(job));
  return it == jobs_.end() ? 0 : static_cast<int>(it->second.size());
}

bool ClusterSpec::HasTask(const TaskId& task) const {
  return task.index >= 0 && task.index < NumTasks(task.job);
}

absl::StatusOr<std::string> ClusterSpec::Address(const TaskId& task) const {
  if (!HasTask(task)) {
    return errors::NotFound("no task ", DeviceName(task), " in the cluster; its devices are: ",
                            absl::StrJoin(Devices(), ", "));
  }
  return jobs_.at(task.job)[task.index];
}

absl::StatusOr<std::string> ClusterSpec::ListenAddress(const TaskId& task) const {
  return Address(task);
}

std::vector<std::string> ClusterSpec::Devices() const {
  std::vector<std::string> out;
  for (const auto& [job, addresses] : jobs_) {
    for (size_t i = 0; i < addresses.size(); ++i) {
      out.push_back(DeviceName(TaskId{job, static_cast<int>(i)}));
    }
  }
  return out;
}

absl::Status ClusterSpec::ValidateDevice(absl::string_view device) const {
  ASSIGN_OR_RETURN(DeviceNameSpec spec, ParseDeviceName(device));
  if (spec.type && *spec.type != "CPU") {
    return errors::InvalidArgument("device '", device, "': recflow has only CPU devices");
  }
  if (!spec.job) return absl::OkStatus();
  const bool ok = HasJob(*spec.job) && (!spec.replica || *spec.replica == 0) &&
                  (!spec.task || *spec.task < NumTasks(*spec.job));
  if (ok) return absl::OkStatus();
  return errors::InvalidArgument("no such device '", device,
                                 "' in the cluster; its devices are: ",
                                 absl::StrJoin(Devices(), ", "));
}

std::string ClusterSpec::ToJson() const {
  std::string out;
  JsonWriter w(&out, kCompact);
  WriteJobs(jobs_, &w);
  return out;
}

bool ClusterConfig::is_chief() const {
  if (has_chief_job()) return task.job == kChiefJob;
  return task.job == kWorkerJob && task.index == 0;
}

int ClusterConfig::num_training_workers() const {
  return cluster.NumTasks(kChiefJob) + cluster.NumTasks(kWorkerJob);
}

int ClusterConfig::training_worker_index() const {
  if (task.job == kChiefJob) return task.index;
  if (task.job == kWorkerJob) return task.index + cluster.NumTasks(kChiefJob);
  return -1;
}

std::vector<std::string> ClusterConfig::ps_addresses() const {
  auto it = cluster.jobs().find(kPsJob);
  return it == cluster.jobs().end() ? std::vector<std::string>{} : it->second;
}

std::string ClusterConfig::chief_address() const {
  const TaskId chief = has_chief_job() ? TaskId{kChiefJob, 0} : TaskId{kWorkerJob, 0};
  auto address = cluster.Address(chief);
  return address.ok() ? *address : "";
}

std::string ClusterConfig::address() const {
  auto address = cluster.Address(task);
  return address.ok() ? *address : "";
}

std::string ClusterConfig::ToTfConfig() const {
  std::string out;
  JsonWriter w(&out, kCompact);
  w.BeginObject().Key("cluster");
  WriteJobs(cluster.jobs(), &w);
  w.Key("task").BeginObject();
  w.Key("type").String(task.job).Key("index").Int(task.index);
  w.EndObject().EndObject();
  return out;
}

}  // namespace recflow::distributed

// The cluster of a distributed training job: which jobs ("chief", "worker",
// "ps", "evaluator") it has, the "host:port" address of every task, and
// which task this process is. Read from TensorFlow's TF_CONFIG environment
// variable (what Kubeflow's TFJob operator, SageMaker and tf.estimator use)
// or from TF1's --ps_hosts / --worker_hosts / --job_name / --task_index
// flags (docs/distributed.md, "Cluster spec").
//
//   ASSIGN_OR_RETURN(ClusterConfig config, ClusterSpec::FromEnv());
//   if (config.task.job == "ps") RunPs(config.cluster.ListenAddress(config.task));
//   int replica = config.training_worker_index();   // 0 .. num_training_workers()-1
//
// Device names are TensorFlow's: "/job:ps/task:1" (DeviceName), with an
// optional "/replica:R" and "/device:CPU:N" (ParseDeviceName).
//
// Values only: ClusterSpec and ClusterConfig are immutable after
// construction and safe to share between threads.
#ifndef RECFLOW_DISTRIBUTED_CLUSTER_SPEC_H_
#define RECFLOW_DISTRIBUTED_CLUSTER_SPEC_H_

#include <map>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace recflow::distributed {

// Standard job names.
inline constexpr char kChiefJob[] = "chief";
inline constexpr char kWorkerJob[] = "worker";
inline constexpr char kPsJob[] = "ps";
inline constexpr char kEvaluatorJob[] = "evaluator";

// One task of the cluster: job name and index within the job.
struct TaskId {
  std::string job;
  int index = 0;

  bool operator==(const TaskId& o) const {
    return job == o.job && index == o.index;
  }
  bool operator<(const TaskId& o) const {
    return job != o.job ? job < o.job : index < o.index;
  }
};

// "/job:JOB/task:INDEX".
std::string DeviceName(const TaskId& task);

// A parsed, possibly partial device name. Unset fields match anything:
// "/job:worker" is every worker task.
struct DeviceNameSpec {
  std::optional<std::string> job;
  std::optional<int> replica;
  std::optional<int> task;
  std::optional<std::string> type;  // "CPU" (upper-cased)
  std::optional<int> id;            // the N of "/device:CPU:N"

  // Canonical form: "/job:ps/replica:0/task:1/device:CPU:0", with only the
  // set fields; "" when none is set.
  std::string ToString() const;
};

// Parses TensorFlow device names: "/job:ps/task:0",
// "/job:ps/replica:0/task:1", "/job:ps/task:1/device:CPU:0", "/job:worker",
// "/device:CPU:0", the legacy "/cpu:0", and "" (nothing set). Fields come in
// the order job, replica, task, device, each at most once.
// InvalidArgument naming the device and the bad part otherwise.
absl::StatusOr<DeviceNameSpec> ParseDeviceName(absl::string_view device);

struct ClusterConfig;

// Job name -> ordered task addresses ("host:port"; task i is the i-th).
// Every address has a host (a name, an IPv4 address, or "[IPv6]") and a port
// in 1..65535; no address appears twice.
class ClusterSpec {
 public:
  using JobMap = std::map<std::string, std::vector<std::string>>;

  ClusterSpec() = default;  // No jobs.

  // Validates addresses (see the class comment) and job names (non-empty,
  // [A-Za-z0-9_-]); a job with no tasks is dropped. InvalidArgument naming
  // the job and the address.
  static absl::StatusOr<ClusterSpec> Create(JobMap jobs);

  // TensorFlow's TF_CONFIG JSON:
  //   {"cluster": {"chief": ["h:p"], "worker": ["h:p", ...], "ps": [...]},
  //    "task": {"type": "worker", "index": 1},
  //    "environment": "cloud"}
  // A job may also be a dict {"0": "h:p", "1": "h:p"} (keys 0..n-1, as TF
  // accepts). "environment" and unknown top-level keys are ignored. The
  // task's type must be a job of the cluster (except "evaluator", which
  // tf.estimator runs outside the training cluster: it then has no address)
  // and its index (a number, or a string of digits) in range. Errors are
  // InvalidArgument starting with "TF_CONFIG" and naming the field: not
  // JSON, no "cluster", a job that is not a list (or dict) of strings, an
  // address without a port or with a bad one, a duplicate address, no
  // "task" or no task "type" / "index", a type not in the cluster, an
  // index out of range (naming how many tasks the job has).
  static absl::StatusOr<ClusterConfig> FromTfConfig(absl::string_view json);

  // FromTfConfig of the TF_CONFIG environment variable; NotFound when it is
  // unset or empty.
  static absl::StatusOr<ClusterConfig> FromEnv();

  // TF1's flags: comma-separated host lists (empty entries are ignored; an
  // empty list means no such job), the chief's address (empty: no chief
  // job; worker 0 is then the chief), this process's job and index.
  // InvalidArgument naming the flag.
  static absl::StatusOr<ClusterConfig> FromFlags(absl::string_view ps_hosts,
                                                 absl::string_view worker_hosts,
                                                 absl::string_view chief_host,
                                                 absl::string_view job_name,
                                                 int task_index);

  const JobMap& jobs() const { return jobs_; }
  bool HasJob(absl::string_view job) const;
  // Number of tasks of `job` (0 when absent).
  int NumTasks(absl::string_view job) const;
  bool HasTask(const TaskId& task) const;

  // The task's address; NotFound naming the task and the cluster's devices
  // when it is not in the cluster.
  absl::StatusOr<std::string> Address(const TaskId& task) const;
  // The address a task's server listens on: its own address in the spec
  // (for a local cluster use 127.0.0.1 hosts). Same errors as Address.
  absl::StatusOr<std::string> ListenAddress(const TaskId& task) const;

  // Every task's device name ("/job:chief/task:0", "/job:ps/task:0", ...),
  // jobs in name order, tasks in index order.
  std::vector<std::string> Devices() const;
  // OK when `device` (ParseDeviceName syntax) names a job of the cluster and,
  // when it has a task, a task of that job, and at most CPU devices; "" and
  // device names without a job (local devices) are OK. InvalidArgument
  // "no such device '/job:ps/task:5' in the cluster; its devices are:
  // /job:chief/task:0, /job:ps/task:0, ..." otherwise.
  absl::Status ValidateDevice(absl::string_view device) const;

  // The cluster as TF_CONFIG's "cluster" value:
  // {"chief":["127.0.0.1:2222"],"ps":[...],"worker":[...]}.
  std::string ToJson() const;

 private:
  JobMap jobs_;
};

// The cluster and which task this process is.
struct ClusterConfig {
  ClusterSpec cluster;
  TaskId task;

  // The chief runs initialization, checkpoints and summaries: the "chief"
  // task, or worker 0 when the cluster has no chief job.
  bool is_chief() const;
  bool has_chief_job() const { return cluster.HasJob(kChiefJob); }
  int num_ps() const { return cluster.NumTasks(kPsJob); }
  // Tasks that train: the chief (when there is a chief job) plus the
  // workers.
  int num_training_workers() const;
  // This task's rank among the training tasks: chief = 0, worker i =
  // i + (has chief job ? 1 : 0); -1 for ps, evaluator and other jobs.
  int training_worker_index() const;
  std::vector<std::string> ps_addresses() const;
  // The chief's address (the "chief" task, or worker 0); "" when neither
  // exists.
  std::string chief_address() const;
  // This task's address; "" for a task outside the cluster (an evaluator).
  std::string address() const;

  // The TF_CONFIG JSON of this config (FromTfConfig(ToTfConfig()) gives it
  // back): {"cluster":{...},"task":{"type":"worker","index":1}}.
  std::string ToTfConfig() const;
};

}  // namespace recflow::distributed

#endif  // RECFLOW_DISTRIBUTED_CLUSTER_SPEC_H_

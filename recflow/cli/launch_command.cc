// recflow launch: a local training cluster on 127.0.0.1 (docs/distributed.md,
// "Local cluster: recflow launch").
//
// Picks one port per task, spawns `recflow train` once per task with that
// task's TF_CONFIG, prefixes every line the tasks write with their role
// ("[ps0] ", "[chief] ", "[worker1] ") on launch's stderr, and supervises:
// when the chief and every worker have exited 0 the ps tasks are stopped
// (SIGTERM, SIGKILL after a grace period) and launch exits 0; when a training
// task fails, the others are stopped and launch exits 1. SIGINT / SIGTERM to
// launch are forwarded to every task.
//
// One thread: a poll() loop over the tasks' stdout/stderr pipes and a
// self-pipe that the signal handlers (SIGCHLD, SIGINT, SIGTERM) write to.
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <iostream>
#include <map>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "recflow/cli/commands.h"
#include "recflow/core/status.h"
#include "recflow/distributed/cluster_spec.h"

extern char** environ;

namespace recflow::cli {
namespace {

using Clock = std::chrono::steady_clock;
using distributed::ClusterConfig;
using distributed::ClusterSpec;
using distributed::TaskId;

constexpr char kLaunchUsage[] =
    "usage: recflow launch --config FILE [--ps N] [--workers M] [--model_dir DIR]\n"
    "                      [--no_chief] [--sync] [--backup_workers K] [--base_port P]\n"
    "                      [--keep_going] [-- FLAGS FOR 'recflow train' ...]\n\n"
    "Starts a local training cluster on 127.0.0.1: N ps tasks, a chief (unless --no_chief)\n"
    "and M workers, each a 'recflow train --config FILE ...' process with its own TF_CONFIG\n"
    "(printed at start, one line per task). The tasks' output goes to stderr, each line\n"
    "prefixed with the task ('[ps0] ', '[chief] ', '[worker1] '). When the chief and every\n"
    "worker have exited 0, the ps tasks still running are stopped and launch exits 0. When a\n"
    "task exits non-zero or is killed, launch names it, stops the others (unless\n"
    "--keep_going) and exits 1.\n"
    "Ctrl-C (SIGINT) or SIGTERM is forwarded to every task; tasks still running 10 s later\n"
    "are killed. Flags after '--' are passed to every task's 'recflow train' (e.g.\n"
    "-- --steps 2000 --data 'day_*.tsv'). See docs/distributed.md.\n\n"
    "       recflow launch --exec [--ps N] [--workers M] [--no_chief] ... -- COMMAND [ARGS ...]\n\n"
    "With --exec every task runs COMMAND ARGS (searched in PATH) under its TF_CONFIG instead of\n"
    "'recflow train': a TensorFlow 1.x ps/worker script, e.g. -- python3 ps_worker.py\n"
    "--model_dir /tmp/m (docs/python.md, \"Distributed training from Python\").\n\n"
    "Flags:\n";

constexpr double kGraceSecs = 10;

struct LaunchFlags {
  std::string config;
  std::string model_dir;
  int num_ps = 1;
  int num_workers = 1;
  bool chief = true;
  bool sync = false;
  int backup_workers = -1;  // -1: not given
  int base_port = 0;        // 0: free ports from the kernel
  bool keep_going = false;
  std::string program;      // default: this executable
  bool exec = false;        // extra is the whole command of every task
  Args extra;               // after "--"
};

// A small non-negative integer flag.
bool ParseCount(const std::string& flag, const std::string& value, int max, int* out) {
  if (!absl::SimpleAtoi(value, out) || *out < 0 || *out > max) {
    std::cerr << "error: --" << flag << " is '" << value << "'; expected an integer in 0.."
              << max << "\n";
    return false;
  }
  return true;
}

// Returns 0 on success, else the exit code (2: usage error; -1: --help shown).
int ParseLaunchFlags(const Args& args, LaunchFlags* f) {
  Args own = args;
  for (size_t i = 0; i < args.size(); ++i) {
    if (args[i] == "--") {
      own.assign(args.begin(), args.begin() + i);
      f->extra.assign(args.begin() + i + 1, args.end());
      break;
    }
  }
  std::string ps = "1", workers = "1", backup, base_port;
  bool no_chief = false;
  Args positional;
  const std::string usage = kLaunchUsage;
  if (!ParseFlags(
          own,
          {{"config", &f->config, nullptr, "the run config (YAML) every task trains (required)"},
           {"ps", &ps, nullptr, "number of ps tasks (default 1; at least 1)"},
           {"workers", &workers, nullptr,
            "number of workers besides the chief (default 1; with --no_chief at least 1)"},
           {"model_dir", &f->model_dir, nullptr,
            "checkpoints and events, shared by all tasks (passed to train; its default: ./model)"},
           {"no_chief", nullptr, &no_chief,
            "no chief task: worker 0 is the chief (initializes, checkpoints, evaluates)"},
           {"sync", nullptr, &f->sync, "synchronous training (passed to train)"},
           {"backup_workers", &backup, nullptr,
            "with --sync: a round takes the first (training tasks - K) gradients"},
           {"base_port", &base_port, nullptr,
            "use consecutive ports from P (default: free ports picked by the kernel)"},
           {"keep_going", nullptr, &f->keep_going,
            "when a task fails, let the others go on (exit status is still 1)"},
           {"program", &f->program, nullptr,
            "the executable run as 'PROGRAM train ...' per task (default: this recflow)"},
           {"exec", nullptr, &f->exec,
            "every task runs the command after '--' (with its TF_CONFIG) instead of "
            "'recflow train'"}},
          &positional, usage.c_str())) {
    return 2;
  }
  if (!positional.empty()) {
    std::cerr << "error: unexpected argument '" << positional[0]
              << "' (flags for 'recflow train' go after '--')\n";
    return 2;
  }
  if (!ParseCount("ps", ps, 1000, &f->num_ps) ||
      !ParseCount("workers", workers, 1000, &f->num_workers)) {
    return 2;
  }
  f->chief = !no_chief;
  if (f->exec) {
    if (f->extra.empty()) {
      std::cerr << "error: --exec needs the command every task runs after '--' (e.g. -- "
                   "python3 ps_worker.py)\n";
      return 2;
    }
    for (const auto& [flag, set] :
         {std::pair<const char*, bool>{"config", !f->config.empty()},
          {"model_dir", !f->model_dir.empty()}, {"sync", f->sync},
          {"backup_workers", !backup.empty()}, {"program", !f->program.empty()}}) {
      if (set) {
        std::cerr << "error: --" << flag << " is a flag of 'recflow train'; with --exec "
                     "give your command its own flags after '--'\n";
        return 2;
      }
    }
  } else if (f->config.empty()) {
    std::cerr << "error: --config is required (the run config every task trains)\n";
    return 2;
  }
  if (f->num_ps < 1) {
    std::cerr << "error: --ps is 0; the cluster needs at least one ps task to hold the model\n";
    return 2;
  }
  const int training = f->num_workers + (f->chief ? 1 : 0);
  if (training < 1) {
    std::cerr << "error: --workers is 0 with --no_chief; the cluster needs at least one "
                 "training task\n";
    return 2;
  }
  if (!backup.empty()) {
    if (!ParseCount("backup_workers", backup, 1000, &f->backup_workers)) return 2;
    if (!f->sync) {
      std::cerr << "error: --backup_workers needs --sync\n";
      return 2;
    }
    if (f->backup_workers >= training) {
      std::cerr << "error: --backup_workers is " << f->backup_workers << " but there are only "
                << training << " training tasks; it must be less\n";
      return 2;
    }
  }
  if (!base_port.empty()) {
    const int n = f->num_ps + training;
    if (!absl::SimpleAtoi(base_port, &f->base_port) || f->base_port < 1 ||
        f->base_port > 65536 - n) {
      std::cerr << "error: --base_port is '" << base_port << "'; expected 1.." << 65536 - n
                << " (" << n << " consecutive ports are used)\n";
      return 2;
    }
  }
  return 0;
}

// `command` itself when it has a '/', else the first executable file of
// that name in PATH; "" when there is none.
std::string FindInPath(const std::string& command) {
  if (command.find('/') != std::string::npos) {
    return access(command.c_str(), X_OK) == 0 ? command : "";
  }
  const char* path = std::getenv("PATH");
  for (absl::string_view dir : absl::StrSplit(path != nullptr ? path : "/usr/bin:/bin", ':')) {
    const std::string candidate = absl::StrCat(dir.empty() ? "." : dir, "/", command);
    if (access(candidate.c_str(), X_OK) == 0) return candidate;
  }
  return "";
}

// `n` distinct free ports on 127.0.0.1: each bound to port 0 and read back;
// all sockets stay open until every port is known, so none repeats.
absl::StatusOr<std::vector<int>> FreePorts(int n) {
  std::vector<int> fds, ports;
  absl::Status status;
  for (int i = 0; i < n && status.ok(); ++i) {
    const int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd < 0) {
      status = errors::Unavailable("socket(): ", std::strerror(errno));
      break;
    }
    fds.push_back(fd);
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    addr.sin_port = 0;
    socklen_t len = sizeof(addr);
    if (bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) != 0 ||
        getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len) != 0) {
      status = errors::Unavailable("binding a free port on 127.0.0.1: ", std::strerror(errno));
      break;
    }
    ports.push_back(ntohs(addr.sin_port));
  }
  for (int fd : fds) close(fd);
  if (!status.ok()) return status;
  return ports;
}

// ---------------------------------------------------------------------------
// Output forwarding.

// Splits one pipe's bytes into lines and writes each, prefixed, to stderr.
// '\n' ends a line (blank lines are dropped); so does '\r' (progress bars
// redraw with it): such
// "progress" lines are forwarded at most once per kProgressSecs per stream,
// so a bar redrawn ten times a second does not flood the terminal ("\r\n"
// is an ordinary line end). A partial line is held until its end, or until
// it is longer than kMaxLine.
class LineForwarder {
 public:
  explicit LineForwarder(std::string prefix) : prefix_(std::move(prefix)) {}

  void Add(const char* data, size_t n) {
    for (size_t i = 0; i < n; ++i) {
      const char c = data[i];
      if (c == '\n') {
        if (!line_.empty()) {
          Emit(line_);
        } else if (last_was_cr_) {
          // "\r\n": the '\r' line was a whole line; emit it if it was held.
          Emit(held_cr_line_);
        }  // else a blank line: dropped (Emit drops empty lines too)
        line_.clear();
        held_cr_line_.clear();
        last_was_cr_ = false;
      } else if (c == '\r') {
        if (last_was_cr_ && line_.empty()) continue;  // "\r\r"
        const auto now = Clock::now();
        if (now - last_progress_ >= std::chrono::duration<double>(kProgressSecs)) {
          Emit(line_);
          last_progress_ = now;
          held_cr_line_.clear();
        } else {
          held_cr_line_ = line_;  // dropped unless "\n" follows at once
        }
        line_.clear();
        last_was_cr_ = true;
      } else {
        if (last_was_cr_) held_cr_line_.clear();
        last_was_cr_ = false;
        line_.push_back(c);
        if (line_.size() >= kMaxLine) {
          Emit(line_);
          line_.clear();
        }
      }
    }
  }

  // At the end of the stream: the partial line, if any.
  void Flush() {
    if (!line_.empty()) Emit(line_);
    line_.clear();
  }

 private:
  static constexpr double kProgressSecs = 2.0;
  static constexpr size_t kMaxLine = 64 << 10;

  void Emit(const std::string& line) {
    if (line.empty()) return;
    std::string out = absl::StrCat(prefix_, line, "\n");
    // One write per line, so that lines of different tasks do not mix.
    const char* p = out.data();
    size_t left = out.size();
    while (left > 0) {
      const ssize_t w = write(STDERR_FILENO, p, left);
      if (w < 0 && errno == EINTR) continue;
      if (w <= 0) return;
      p += w;
      left -= static_cast<size_t>(w);
    }
  }

  std::string prefix_;
  std::string line_;
  std::string held_cr_line_;
  bool last_was_cr_ = false;
  Clock::time_point last_progress_{};
};

void Say(const std::string& message) {
  std::string out = absl::StrCat("[launch] ", message, "\n");
  ssize_t unused = write(STDERR_FILENO, out.data(), out.size());
  (void)unused;
}

// ---------------------------------------------------------------------------
// Signals: the handlers write the signal number to a self-pipe.

int g_signal_pipe[2] = {-1, -1};

void OnSignal(int sig) {
  const int saved = errno;
  const unsigned char b = static_cast<unsigned char>(sig);
  ssize_t unused = write(g_signal_pipe[1], &b, 1);
  (void)unused;
  errno = saved;
}

absl::Status InstallSignalHandlers() {
  if (pipe2(g_signal_pipe, O_CLOEXEC | O_NONBLOCK) != 0) {
    return errors::Internal("pipe2: ", std::strerror(errno));
  }
  struct sigaction sa {};
  sa.sa_handler = OnSignal;
  sigemptyset(&sa.sa_mask);
  sa.sa_flags = SA_RESTART;
  for (int sig : {SIGCHLD, SIGINT, SIGTERM}) {
    if (sigaction(sig, &sa, nullptr) != 0) {
      return errors::Internal("sigaction: ", std::strerror(errno));
    }
  }
  return absl::OkStatus();
}

// ---------------------------------------------------------------------------
// Tasks.

struct Task {
  TaskId id;
  std::string name;  // "ps0", "chief", "worker1"
  bool training = false;
  std::string tf_config;
  pid_t pid = -1;
  bool running = false;
  int wait_status = 0;
  int fds[2] = {-1, -1};  // stdout, stderr read ends (-1: closed)
  std::unique_ptr<LineForwarder> out[2];
  Clock::time_point started;
  double seconds = 0;
};

std::string DescribeExit(int status) {
  if (WIFEXITED(status)) return absl::StrCat("exited with status ", WEXITSTATUS(status));
  if (WIFSIGNALED(status)) {
    const int sig = WTERMSIG(status);
    const char* name = strsignal(sig);
    return absl::StrCat("was killed by signal ", sig, " (", name ? name : "?", ")");
  }
  return absl::StrCat("ended with wait status ", status);
}

bool Succeeded(int status) { return WIFEXITED(status) && WEXITSTATUS(status) == 0; }

// Starts `task`: `argv` with TF_CONFIG set; its stdout / stderr into pipes.
absl::Status Spawn(const std::string& program, const Args& argv, Task* task) {
  int out_pipe[2], err_pipe[2];
  if (pipe2(out_pipe, O_CLOEXEC) != 0) return errors::Internal("pipe2: ", std::strerror(errno));
  if (pipe2(err_pipe, O_CLOEXEC) != 0) {
    close(out_pipe[0]);
    close(out_pipe[1]);
    return errors::Internal("pipe2: ", std::strerror(errno));
  }
  // Everything the child needs, built before fork (only async-signal-safe
  // calls after it).
  std::vector<char*> cargv;
  for (const std::string& a : argv) cargv.push_back(const_cast<char*>(a.c_str()));
  cargv.push_back(nullptr);
  const std::string tf_config = "TF_CONFIG=" + task->tf_config;
  std::vector<char*> cenv;
  for (char** e = environ; *e != nullptr; ++e) {
    if (std::strncmp(*e, "TF_CONFIG=", 10) != 0) cenv.push_back(*e);
  }
  cenv.push_back(const_cast<char*>(tf_config.c_str()));
  cenv.push_back(nullptr);
  const int devnull = open("/dev/null", O_RDONLY | O_CLOEXEC);
  const pid_t parent = getpid();
  const std::string exec_error = absl::StrCat("error: cannot run '", program, "': ");

  // Note [signals around fork]: the child inherits launch's handlers, which
  // write to launch's signal pipe. A SIGTERM that StopAll sends to a task
  // that has not yet reset them (a ps exiting at once while the others
  // start, on a loaded machine) would run launch's handler in the child and
  // read back in launch as "launch got SIGTERM" (exit 143). So every signal
  // is blocked across fork; the child resets the handlers and only then
  // unblocks, so a signal sent to it early takes its default action.
  sigset_t all, old_mask;
  sigfillset(&all);
  pthread_sigmask(SIG_BLOCK, &all, &old_mask);
  const pid_t pid = fork();
  if (pid != 0) pthread_sigmask(SIG_SETMASK, &old_mask, nullptr);
  if (pid < 0) {
    const int err = errno;
    for (int fd : {out_pipe[0], out_pipe[1], err_pipe[0], err_pipe[1], devnull}) {
      if (fd >= 0) close(fd);
    }
    return errors::Internal("fork: ", std::strerror(err));
  }
  if (pid == 0) {
    // Child. Its own process group, so that a Ctrl-C at the terminal reaches
    // launch only (which forwards it); killed if launch dies.
    setpgid(0, 0);
    prctl(PR_SET_PDEATHSIG, SIGTERM);
    if (getppid() != parent) _exit(1);
    if (devnull >= 0) dup2(devnull, STDIN_FILENO);
    dup2(out_pipe[1], STDOUT_FILENO);
    dup2(err_pipe[1], STDERR_FILENO);
    struct sigaction dfl {};
    dfl.sa_handler = SIG_DFL;
    sigemptyset(&dfl.sa_mask);
    for (int sig : {SIGCHLD, SIGINT, SIGTERM, SIGPIPE}) sigaction(sig, &dfl, nullptr);
    sigprocmask(SIG_SETMASK, &old_mask, nullptr);
    execve(program.c_str(), cargv.data(), cenv.data());
    const char* why = std::strerror(errno);
    ssize_t unused = write(STDERR_FILENO, exec_error.data(), exec_error.size());
    unused = write(STDERR_FILENO, why, std::strlen(why));
    unused = write(STDERR_FILENO, "\n", 1);
    (void)unused;
    _exit(127);
  }
  setpgid(pid, pid);  // Also here, so that a signal sent at once reaches it.
  if (devnull >= 0) close(devnull);
  close(out_pipe[1]);
  close(err_pipe[1]);
  task->pid = pid;
  task->running = true;
  task->started = Clock::now();
  task->fds[0] = out_pipe[0];
  task->fds[1] = err_pipe[0];
  task->out[0] = std::make_unique<LineForwarder>("[" + task->name + "] ");
  task->out[1] = std::make_unique<LineForwarder>("[" + task->name + "] ");
  return absl::OkStatus();
}

class Launcher {
 public:
  explicit Launcher(LaunchFlags flags) : f_(std::move(flags)) {}

  int Run() {
    absl::Status s = Start();
    if (!s.ok()) {
      std::cerr << "error: " << s.message() << "\n";
      StopAll(SIGKILL);
      Loop();
      return 1;
    }
    Loop();
    return Finish();
  }

 private:
  absl::Status Start() {
    RETURN_IF_ERROR(InstallSignalHandlers());
    std::string program = f_.exec ? FindInPath(f_.extra[0]) : f_.program;
    if (program.empty() && f_.exec) {
      return errors::InvalidArgument("--exec: command '", f_.extra[0],
                                     "' is not in PATH or not executable");
    }
    if (program.empty()) {
      char buf[4096];
      const ssize_t n = readlink("/proc/self/exe", buf, sizeof(buf) - 1);
      if (n <= 0) return errors::Internal("readlink /proc/self/exe: ", std::strerror(errno));
      program.assign(buf, static_cast<size_t>(n));
    }
    if (access(program.c_str(), X_OK) != 0) {
      return errors::InvalidArgument("--program '", program, "' is not executable: ",
                                     std::strerror(errno));
    }
    // Tasks: chief, workers, ps (the order of ports and of the printout).
    std::vector<TaskId> ids;
    if (f_.chief) ids.push_back({distributed::kChiefJob, 0});
    for (int i = 0; i < f_.num_workers; ++i) ids.push_back({distributed::kWorkerJob, i});
    for (int i = 0; i < f_.num_ps; ++i) ids.push_back({distributed::kPsJob, i});
    std::vector<int> ports;
    if (f_.base_port > 0) {
      for (size_t i = 0; i < ids.size(); ++i) ports.push_back(f_.base_port + static_cast<int>(i));
    } else {
      ASSIGN_OR_RETURN(ports, FreePorts(static_cast<int>(ids.size())));
    }
    ClusterSpec::JobMap jobs;
    for (size_t i = 0; i < ids.size(); ++i) {
      jobs[ids[i].job].push_back(absl::StrCat("127.0.0.1:", ports[i]));
    }
    ClusterConfig config;
    ASSIGN_OR_RETURN(config.cluster, ClusterSpec::Create(std::move(jobs)));

    Args argv = {program, "train", "--config", f_.config};
    if (!f_.model_dir.empty()) argv.insert(argv.end(), {"--model_dir", f_.model_dir});
    if (f_.sync) argv.push_back("--sync");
    if (f_.backup_workers >= 0) {
      argv.insert(argv.end(), {"--backup_workers", std::to_string(f_.backup_workers)});
    }
    argv.insert(argv.end(), f_.extra.begin(), f_.extra.end());
    if (f_.exec) argv = Args(f_.extra.begin(), f_.extra.end());

    Say(absl::StrCat("cluster ", config.cluster.ToJson(), "; each task runs: ",
                     absl::StrJoin(f_.exec ? f_.extra : Args(argv.begin() + 1, argv.end()),
                                   " ")));
    for (const TaskId& id : ids) {
      Task task;
      task.id = id;
      task.name = id.job == distributed::kChiefJob ? "chief" : absl::StrCat(id.job, id.index);
      task.training = id.job != distributed::kPsJob;
      config.task = id;
      task.tf_config = config.ToTfConfig();
      Say(absl::StrCat(task.name, ": TF_CONFIG='", task.tf_config, "'"));
      tasks_.push_back(std::move(task));
    }
    started_ = Clock::now();
    // ps first, so that they are listening when the trainers connect.
    for (Task& t : tasks_) {
      if (!t.training) RETURN_IF_ERROR(Spawn(program, argv, &t));
    }
    for (Task& t : tasks_) {
      if (t.training) RETURN_IF_ERROR(Spawn(program, argv, &t));
    }
    return absl::OkStatus();
  }

  // Until every task has exited and its pipes are drained.
  void Loop() {
    while (true) {
      bool any = false;
      for (const Task& t : tasks_) any = any || Alive(t);
      if (!any) return;
      std::vector<pollfd> pfds;
      std::vector<std::pair<Task*, int>> owners;
      pfds.push_back({g_signal_pipe[0], POLLIN, 0});
      owners.push_back({nullptr, 0});
      for (Task& t : tasks_) {
        for (int k = 0; k < 2; ++k) {
          if (t.fds[k] < 0) continue;
          pfds.push_back({t.fds[k], POLLIN, 0});
          owners.push_back({&t, k});
        }
      }
      const int ready = poll(pfds.data(), pfds.size(), 200);
      if (ready < 0 && errno != EINTR) {
        Say(absl::StrCat("poll: ", std::strerror(errno)));
        StopAll(SIGKILL);
      }
      for (size_t i = 0; ready > 0 && i < pfds.size(); ++i) {
        if (pfds[i].revents == 0) continue;
        if (owners[i].first == nullptr) {
          HandleSignals();
        } else {
          ReadFrom(owners[i].first, owners[i].second);
        }
      }
      Reap();
      CheckDeadline();
    }
  }

  void ReadFrom(Task* t, int k) {
    char buf[16384];
    const ssize_t n = read(t->fds[k], buf, sizeof(buf));
    if (n > 0) {
      t->out[k]->Add(buf, static_cast<size_t>(n));
      return;
    }
    if (n < 0 && (errno == EINTR || errno == EAGAIN)) return;
    t->out[k]->Flush();
    close(t->fds[k]);
    t->fds[k] = -1;
  }

  void HandleSignals() {
    unsigned char sigs[64];
    ssize_t n;
    while ((n = read(g_signal_pipe[0], sigs, sizeof(sigs))) > 0) {
      for (ssize_t i = 0; i < n; ++i) {
        const int sig = sigs[i];
        if (sig == SIGCHLD) continue;  // Reap() runs after every poll.
        if (interrupted_ != 0) {
          Say(absl::StrCat("second ", strsignal(sig), ": killing every task"));
          StopAll(SIGKILL);
          continue;
        }
        interrupted_ = sig;
        Say(absl::StrCat(strsignal(sig), ": forwarding it to every task (again to kill)"));
        StopAll(sig);
      }
    }
  }

  void Reap() {
    while (true) {
      int status = 0;
      const pid_t pid = waitpid(-1, &status, WNOHANG);
      if (pid <= 0) return;
      for (Task& t : tasks_) {
        if (t.pid != pid || !t.running) continue;
        t.running = false;
        t.wait_status = status;
        t.seconds = std::chrono::duration<double>(Clock::now() - t.started).count();
        OnExit(t);
      }
    }
  }

  void OnExit(const Task& t) {
    const bool ok = Succeeded(t.wait_status);
    const std::string how = DescribeExit(t.wait_status);
    Say(absl::StrCat(t.name, " ", how, " after ", absl::StrFormat("%.1f", t.seconds), " s"));
    // A ps that ends with status 0 by itself is fine (it stops once the
    // chief reports the job finished); any task ending otherwise before
    // launch stops them is a failure.
    const bool expected = stopping_ || interrupted_ != 0;
    if (!expected && !ok) {
      if (failure_.empty()) failure_ = absl::StrCat(t.name, " ", how);
      if (!f_.keep_going) {
        Say(absl::StrCat("stopping the other tasks (", failure_, ")"));
        StopAll(SIGTERM);
        return;
      }
    }
    if (!stopping_) {
      bool trainers_done = true;
      for (const Task& x : tasks_) trainers_done = trainers_done && (!x.training || !x.running);
      if (trainers_done) {
        Say(failure_.empty() ? "the chief and every worker finished; stopping the ps tasks"
                             : "every training task has exited; stopping the ps tasks");
        StopAll(SIGTERM);
      }
    }
  }

  // A task is alive while its process runs or a process it started (in its
  // process group) still holds its output pipes.
  static bool Alive(const Task& t) { return t.running || t.fds[0] >= 0 || t.fds[1] >= 0; }

  // Sends `sig` to the process group of every live task; the first call
  // starts the grace period after which the rest are killed.
  void StopAll(int sig) {
    if (!stopping_) {
      stopping_ = true;
      deadline_ = Clock::now() + std::chrono::duration_cast<Clock::duration>(
                                     std::chrono::duration<double>(kGraceSecs));
    }
    for (Task& t : tasks_) {
      if (t.pid > 0 && Alive(t)) kill(-t.pid, sig);
    }
  }

  void CheckDeadline() {
    if (!stopping_ || killed_ || Clock::now() < deadline_) return;
    std::vector<std::string> names;
    for (Task& t : tasks_) {
      if (t.pid > 0 && Alive(t)) names.push_back(t.name);
    }
    if (names.empty()) return;
    killed_ = true;
    Say(absl::StrCat("still running after ", kGraceSecs, " s, killing: ",
                     absl::StrJoin(names, ", ")));
    for (Task& t : tasks_) {
      if (t.pid > 0 && Alive(t)) kill(-t.pid, SIGKILL);
    }
  }

  int Finish() {
    const double secs = std::chrono::duration<double>(Clock::now() - started_).count();
    int trainers = 0, ok = 0;
    for (const Task& t : tasks_) {
      if (!t.training) continue;
      ++trainers;
      ok += Succeeded(t.wait_status) ? 1 : 0;
    }
    const std::string took = absl::StrFormat("%.1f", secs);
    if (interrupted_ != 0) {
      Say(absl::StrCat("interrupted by ", strsignal(interrupted_), " after ", took, " s; ", ok,
                       " of ", trainers, " training tasks had finished"));
      return 128 + interrupted_;
    }
    if (!failure_.empty()) {
      Say(absl::StrCat("FAILED after ", took, " s: ", failure_, "; ", ok, " of ", trainers,
                       " training tasks finished"));
      return 1;
    }
    Say(absl::StrCat("done in ", took, " s: ", trainers, " training tasks finished, ", f_.num_ps,
                     " ps stopped"));
    return 0;
  }

  LaunchFlags f_;
  std::vector<Task> tasks_;
  Clock::time_point started_;
  std::string failure_;      // the first failure, for the summary
  int interrupted_ = 0;      // the signal launch got, or 0
  bool stopping_ = false;    // StopAll was called
  bool killed_ = false;      // the grace period ran out
  Clock::time_point deadline_;
};

}  // namespace

int LaunchCommand(const Args& args) {
  LaunchFlags flags;
  const int code = ParseLaunchFlags(args, &flags);
  if (code != 0) return code;
  return Launcher(std::move(flags)).Run();
}

}  // namespace recflow::cli

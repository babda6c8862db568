// recflow: the command-line tool.
//
//   recflow [--load_op_library=PATH ...] COMMAND [ARGS]
//
// Commands: graph inspect, ops list/show, demo, gen-data, version, help.
#include <cstring>
#include <iostream>

#include "absl/strings/match.h"
#include "absl/strings/str_join.h"
#include "recflow/cli/commands.h"
#include "recflow/framework/load_library.h"

namespace recflow::cli {

bool ParseFlags(const Args& args, const std::vector<Flag>& flags, Args* positional,
                const char* usage) {
  for (size_t i = 0; i < args.size(); ++i) {
    const std::string& a = args[i];
    if (a == "--help" || a == "-h") {
      std::cout << usage;
      for (const Flag& f : flags) {
        std::cout << "  --" << f.name << (f.value ? "=VALUE" : "") << "\n      " << f.help << "\n";
      }
      std::exit(0);
    }
    if (!absl::StartsWith(a, "--")) {
      positional->push_back(a);
      continue;
    }
    std::string name = a.substr(2), value;
    const size_t eq = name.find('=');
    const bool has_value = eq != std::string::npos;
    if (has_value) {
      value = name.substr(eq + 1);
      name.resize(eq);
    }
    const Flag* match = nullptr;
    for (const Flag& f : flags) {
      if (f.name == name) match = &f;
    }
    if (match == nullptr) {
      std::cerr << "error: unknown flag --" << name << "\n" << usage;
      return false;
    }
    if (match->present != nullptr) {
      *match->present = !has_value || value == "true" || value == "1";
      continue;
    }
    if (!has_value) {
      if (i + 1 >= args.size()) {
        std::cerr << "error: flag --" << name << " needs a value\n";
        return false;
      }
      value = args[++i];
    }
    *match->value = value;
  }
  return true;
}

}  // namespace recflow::cli

namespace {

constexpr char kUsage[] =
    "usage: recflow [--load_op_library=PATH ...] COMMAND [ARGS]\n"
    "\n"
    "Commands:\n"
    "  graph inspect PATH   print a GraphDef (binary or text) or the graph in a SavedModel\n"
    "  ops list             list the registered ops\n"
    "  ops show NAME        print one op's definition\n"
    "  demo                 build and run a small MLP on synthetic data\n"
    "  gen-data             write the synthetic click-log dataset (--rows N --out DIR ...)\n"
    "  train                train a zoo model from a YAML run config (--config FILE ...)\n"
    "  eval                 evaluate a trained model directory (--model_dir DIR ...)\n"
    "  export               a trained model directory as a SavedModel (--export_dir DIR)\n"
    "  ckpt inspect|merge|diff  list and verify, merge or compare checkpoints\n"
    "  saved_model show|run  inspect a SavedModel's signatures or run one\n"
    "  serve                serve SavedModels over TF Serving's REST and gRPC APIs\n"
    "  launch               run a local training cluster (--ps N --workers M --config FILE)\n"
    "  version              print the version\n"
    "  help                 this message\n"
    "\n"
    "Global flags:\n"
    "  --load_op_library=PATH  load a custom-op library first (repeatable)\n"
    "\n"
    "Run 'recflow COMMAND --help' for a command's flags.\n";

}  // namespace

int main(int argc, char** argv) {
  using namespace recflow;
  std::vector<std::string> args(argv + 1, argv + argc);
  // Global flags come before the command.
  size_t i = 0;
  for (; i < args.size() && absl::StartsWith(args[i], "--"); ++i) {
    std::string path;
    if (absl::StartsWith(args[i], "--load_op_library=")) {
      path = args[i].substr(strlen("--load_op_library="));
    } else if (args[i] == "--load_op_library" && i + 1 < args.size()) {
      path = args[++i];
    } else if (args[i] == "--help") {
      std::cout << kUsage;
      return 0;
    } else {
      std::cerr << "error: unknown global flag " << args[i] << "\n" << kUsage;
      return 2;
    }
    auto ops = LoadOpLibrary(path);
    if (!ops.ok()) {
      std::cerr << "error: " << ops.status().message() << "\n";
      return 1;
    }
    std::vector<std::string> names;
    for (const auto& op : ops->op()) names.push_back(op.name());
    std::cerr << "loaded " << path << ": " << (names.empty() ? "no new ops" : absl::StrJoin(names, ", "))
              << "\n";
  }
  if (i >= args.size()) {
    std::cerr << kUsage;
    return 2;
  }
  const std::string command = args[i];
  const cli::Args rest(args.begin() + i + 1, args.end());
  if (command == "graph") return cli::GraphCommand(rest);
  if (command == "ops") return cli::OpsCommand(rest);
  if (command == "demo") return cli::DemoCommand(rest);
  if (command == "gen-data") return cli::GenDataCommand(rest);
  if (command == "ckpt") return cli::CkptCommand(rest);
  if (command == "saved_model") return cli::SavedModelCommand(rest);
  if (command == "train") return cli::TrainCommand(rest);
  if (command == "eval") return cli::EvalCommand(rest);
  if (command == "export") return cli::ExportCommand(rest);
  if (command == "serve") return cli::ServeCommand(rest);
  if (command == "launch") return cli::LaunchCommand(rest);
  if (command == "version") {
    std::cout << "recflow 0.1.0\n";
    return 0;
  }
  if (command == "help") {
    std::cout << kUsage;
    return 0;
  }
  std::cerr << "error: unknown command '" << command << "'\n" << kUsage;
  return 2;
}

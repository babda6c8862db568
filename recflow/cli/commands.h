// Subcommands of the `recflow` command-line tool. Each takes the arguments
// after its name and returns a process exit code; errors go to stderr.
#ifndef RECFLOW_CLI_COMMANDS_H_
#define RECFLOW_CLI_COMMANDS_H_

#include <string>
#include <vector>

namespace recflow::cli {

using Args = std::vector<std::string>;

int GraphCommand(const Args& args);  // recflow graph inspect PATH ...
int OpsCommand(const Args& args);    // recflow ops list | show NAME
int DemoCommand(const Args& args);   // recflow demo ...
int GenDataCommand(const Args& args);  // recflow gen-data --rows N --out DIR ...
int CkptCommand(const Args& args);     // recflow ckpt inspect | merge | diff ...
int SavedModelCommand(const Args& args);  // recflow saved_model show | run ...
int TrainCommand(const Args& args);   // recflow train --config FILE ...
int EvalCommand(const Args& args);    // recflow eval --model_dir DIR ...
int ExportCommand(const Args& args);  // recflow export --model_dir DIR --export_dir DIR
int ServeCommand(const Args& args);   // recflow serve --model_base_path DIR ...
int LaunchCommand(const Args& args);  // recflow launch --ps N --workers M --config FILE ...

// Parses "--name=value" / "--name value" / "--flag"; returns false and
// prints an error for unknown flags. Positional args go to `positional`.
struct Flag {
  std::string name;
  std::string* value;      // for valued flags
  bool* present = nullptr; // for boolean flags
  std::string help;
};
bool ParseFlags(const Args& args, const std::vector<Flag>& flags, Args* positional,
                const char* usage);

}  // namespace recflow::cli

#endif  // RECFLOW_CLI_COMMANDS_H_

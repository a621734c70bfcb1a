// The `stoke` command: the application, its global flags and the dispatch to the command that was
// parsed; the commands are registered by their groups (cli/commands.h).
#include <CLI/CLI.hpp>

#include <vector>

#include "cli/commands.h"
#include "stoke/process.h"

int main(int argc, char** argv) {
  // Before anything else: this may start the program again (stoke/process.h).
  stoke::ReexecWithHugePageHeap(argv);
  CLI::App app{"stoke: many small array files in, Delta tables of Parquet out, laid out so that one sample is one read."};
  app.require_subcommand(1);
  app.set_version_flag("--version", "stoke 0.1.0");
  stoke::cli::Context ctx;
  ctx.app = &app;
  app.add_flag("--no-progress", ctx.no_progress, "Never draw progress bars (they are drawn only on terminals anyway)");

  std::vector<stoke::cli::Command> commands;
  stoke::cli::AddSourceCommands(app, ctx, &commands);
  stoke::cli::AddTableCommands(app, ctx, &commands);
  stoke::cli::AddBenchCommands(app, ctx, &commands);

  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    return app.exit(e);
  }
  for (const stoke::cli::Command& c : commands) {
    if (c.app->parsed()) return c.run();
  }
  return 0;
}

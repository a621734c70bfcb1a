// The `stoke` command's parts: main.cc sets up the application and its global flags, and each
// command group registers its subcommands (source_commands.cc: synth, convert, ingest;
// table_commands.cc: optimize, vacuum, query, checkpoint, history, inspect, cat; bench_commands.cc:
// bench load, bench files). Library errors (Status) become messages and exit codes in Fail, in one
// place.
#pragma once

#include <CLI/CLI.hpp>

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "stoke/status.h"

namespace stoke::cli {

// What every command sees when it runs: the application (CLI11 formats validation errors found
// after parsing through it) and the global flags, set once parsing is done.
struct Context {
  CLI::App* app = nullptr;
  bool no_progress = false;  // --no-progress
};

// A (sub)command and what runs when it is the one parsed; run() returns the process's exit code.
// The options it fills live as long as `run`.
struct Command {
  CLI::App* app = nullptr;
  std::function<int()> run;
};

void AddSourceCommands(CLI::App& app, const Context& ctx, std::vector<Command>* out);
void AddTableCommands(CLI::App& app, const Context& ctx, std::vector<Command>* out);
void AddBenchCommands(CLI::App& app, const Context& ctx, std::vector<Command>* out);

// The help of a command's table argument.
inline constexpr const char* kTableHelp =
    "Table: a directory, or a URI (az://container/path, abfss://, https://<account>.blob.core.windows.net/..., "
    "s3://bucket/path)";
// For commands that read: a Delta table, or Parquet files without a log.
inline constexpr const char* kReadTableHelp =
    "Table: a directory, or a URI (az://container/path, abfss://, https://<account>.blob.core.windows.net/..., "
    "s3://bucket/path); without a Delta log, a plain Parquet dataset: the *.parquet files under a directory "
    "(key=value directories are partition columns), a glob ('data/train-*.parquet', '**' for any depth) or one file";

// Prints "stoke: error: <status>" to stderr and returns the error exit code (1).
int Fail(const Status& s);
// "12.3 MB".
std::string Mb(int64_t bytes);
// "30,30,10" (or "224x160") as its sizes; CLI::ValidationError naming `option`, with `example`,
// when a part is not an integer.
std::vector<int64_t> ParseShape(const std::string& s, const char* option = "--shape", const char* example = "30,30,10");
// CLI::PositiveNumber and CLI::NonNegativeNumber with messages a user reads ("must be a finite
// number > 0, got 0" where CLI11 says "Value 0 not in range 0.000000 to 179769313486231570...");
// infinity and NaN are refused. Numbers only: a size option puts CLI::AsSizeValue before them.
const CLI::Validator& Positive();
const CLI::Validator& NonNegative();
// --select / --columns: "a,b,c" as its names, in order (empty parts kept; "" is no list).
std::vector<std::string> ColumnList(const std::string& text);

}  // namespace stoke::cli

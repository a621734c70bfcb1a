// The commands on a table or a Parquet file: optimize, vacuum, query, checkpoint, history, inspect and cat.
#include <CLI/CLI.hpp>

#include <cstdio>
#include <iostream>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "cli/commands.h"
#include "stoke/codec.h"
#include "stoke/maintenance.h"
#include "stoke/row_format.h"
#include "stoke/table.h"
#include "stoke/tools.h"

namespace stoke::cli {
namespace {

// Prints a query's rows (or, counting, their number) in `format` to stdout; 1 on failure.
int PrintQuery(const QueryOptions& q, RowFormat format) {
  auto r = QueryTableRows(q);
  if (!r.ok()) return Fail(r.status());
  const std::string text = QueryRowsText(*r, format);
  std::fwrite(text.data(), 1, text.size(), stdout);
  return 0;
}

constexpr char kTimestampHelp[] =
    "Time travel: the table as of its newest version committed at or before this time (ISO-8601, "
    "e.g. 2026-11-30T08:00:00Z, UTC unless a zone follows; or milliseconds since the epoch)";

// --timestamp TIME beside --version N: the version it names, into *version (nothing when empty).
Status ResolveTimestamp(const std::string& table, const std::string& timestamp, std::optional<int64_t>* version) {
  if (timestamp.empty()) return Status::OK();
  auto v = TableVersionAt(table, timestamp);
  if (!v.ok()) return v.status();
  *version = *v;
  return Status::OK();
}

}  // namespace

namespace {

void AddOptimize(CLI::App& app, const Context& ctx, std::vector<Command>* out) {
  struct State {
    OptimizeOptions oo;
    std::string codec;  // "" = the table's
  };
  auto s = std::make_shared<State>();
  auto* cmd = app.add_subcommand("optimize", "Compact a table's small files into files of the target size (one commit)");
  cmd->add_option("table", s->oo.table_dir, kTableHelp)->required();
  cmd->add_option("--target-file-size", s->oo.target_file_bytes, "Size of the compacted files, e.g. 1GiB")
      ->transform(CLI::AsSizeValue(false))
      ->default_str("1GiB");
  cmd->add_option("--row-group-size", s->oo.row_group_bytes, "Row group size, e.g. 128MiB")
      ->transform(CLI::AsSizeValue(false))
      ->default_str("128MiB");
  cmd->add_option("--where", s->oo.where, "Only compact files whose statistics may match this predicate");
  cmd->add_option("--sort-by", s->oo.sort_by,
                  "Order rows by this scalar column within the new files (rewrites every matching file)");
  cmd->add_option("--codec", s->codec,
                  "Page codec of the new files (default: the table's own, as recorded at ingest; auto when none)");
  cmd->add_option("--threads", s->oo.threads, "Threads (0 = one per available CPU)")->capture_default_str();
  out->push_back({cmd, [s, &ctx]() -> int {
    OptimizeOptions& oo = s->oo;
    oo.progress = !ctx.no_progress;
    if (!s->codec.empty()) {
      auto codec = ParseCodec(s->codec);
      if (!codec.ok()) return Fail(codec.status());
      oo.codec = *codec;
    }
    auto r = OptimizeTable(oo);
    if (!r.ok()) return Fail(r.status());
    if (r->version < 0) {
      std::printf("optimize: nothing to compact (%lld files)\n", static_cast<long long>(r->files_before));
      return 0;
    }
    std::printf("optimize: %lld files -> %lld files (rewrote %lld files, %lld rows, %s, into %lld), version %lld, in %.2f s\n",
                static_cast<long long>(r->files_before), static_cast<long long>(r->files_after),
                static_cast<long long>(r->files_removed), static_cast<long long>(r->rows_rewritten),
                Mb(r->bytes_rewritten).c_str(), static_cast<long long>(r->files_added), static_cast<long long>(r->version),
                r->seconds);
    return 0;
  }});
}

void AddVacuum(CLI::App& app, const Context& ctx, std::vector<Command>* out) {
  auto vo = std::make_shared<VacuumOptions>();
  auto* cmd = app.add_subcommand("vacuum", "Delete data files no version inside the retention window references");
  cmd->add_option("table", vo->table_dir, kTableHelp)->required();
  cmd->add_option("--retain", vo->retain_hours, "Retention in hours: versions newer than this stay readable")
      ->capture_default_str();
  cmd->add_flag("--dry-run", vo->dry_run, "List the files that would be deleted; delete nothing");
  out->push_back({cmd, [vo, &ctx]() -> int {
    vo->progress = !ctx.no_progress;
    auto r = VacuumTable(*vo);
    if (!r.ok()) return Fail(r.status());
    for (const auto& f : r->files) std::printf("%s%s\n", vo->dry_run ? "would delete " : "deleted ", f.c_str());
    std::printf("vacuum: %s %zu files (%s); %lld files referenced by retained versions kept\n",
                vo->dry_run ? "would delete" : "deleted", r->files.size(), Mb(r->bytes).c_str(),
                static_cast<long long>(r->referenced_kept));
    return 0;
  }});
}

void AddQuery(CLI::App& app, std::vector<Command>* out) {
  struct State {
    QueryOptions qo;
    std::string select;
    std::string format{RowFormatName(RowFormat::kTable)};
    std::string timestamp;
  };
  auto s = std::make_shared<State>();
  auto* cmd = app.add_subcommand("query", "Rows of a table matching a predicate, e.g. --where \"label = 1 AND x < 100\"");
  cmd->add_option("table", s->qo.table_dir, kReadTableHelp)->required();
  cmd->add_option("--where", s->qo.where,
                  "Predicate over scalar columns: = != < <= > >= IN, NOT IN, BETWEEN, IS [NOT] NULL, AND, OR, NOT; "
                  "dates as DATE 'yyyy-mm-dd', timestamps as TIMESTAMP 'yyyy-mm-dd hh:mm:ss' (UTC unless a zone "
                  "follows), decimals as numbers");
  cmd->add_option("--select", s->select, "Comma-separated columns (default: all)");
  cmd->add_option("--limit", s->qo.limit, "At most N rows (-1 = all)")->capture_default_str();
  cmd->add_flag("--count", s->qo.count_only, "Print only the number of matching rows");
  auto* version = cmd->add_option("--version", s->qo.version, "Query the table as of this version");
  cmd->add_option("--timestamp", s->timestamp, kTimestampHelp)->excludes(version);
  cmd->add_option("--format", s->format, "table, csv or json (one object per line)")
      ->check(CLI::IsMember({"table", "csv", "json"}))
      ->capture_default_str();
  out->push_back({cmd, [s]() -> int {
    s->qo.select = ColumnList(s->select);
    auto format = ParseRowFormat(s->format);
    if (!format.ok()) return Fail(format.status());
    Status at = ResolveTimestamp(s->qo.table_dir, s->timestamp, &s->qo.version);
    if (!at.ok()) return Fail(at);
    return PrintQuery(s->qo, *format);
  }});
}

void AddCheckpoint(CLI::App& app, std::vector<Command>* out) {
  struct State {
    std::string table;
    std::optional<int64_t> version;
  };
  auto s = std::make_shared<State>();
  auto* cmd = app.add_subcommand("checkpoint", "Write a Delta checkpoint (commits write one every 10 versions)");
  cmd->add_option("table", s->table, kTableHelp)->required();
  cmd->add_option("--version", s->version, "Version to checkpoint (default: latest)");
  out->push_back({cmd, [s]() -> int {
    Status st = CheckpointTable(s->table, s->version);
    if (!st.ok()) return Fail(st);
    std::printf("checkpoint written\n");
    return 0;
  }});
}

void AddHistory(CLI::App& app, std::vector<Command>* out) {
  struct State {
    std::string table;
    int64_t limit = kNoLimit;
    bool json = false;
  };
  auto s = std::make_shared<State>();
  auto* cmd = app.add_subcommand("history", "List a table's versions, newest first");
  cmd->add_option("table", s->table, kTableHelp)->required();
  cmd->add_option("--limit", s->limit, "Show at most N versions (-1 = all)")->capture_default_str();
  cmd->add_flag("--json", s->json, "One JSON object per version");
  out->push_back({cmd, [s]() -> int {
    auto versions = TableHistory(s->table, s->limit);
    if (!versions.ok()) return Fail(versions.status());
    std::cout << (s->json ? HistoryJsonLines(*versions) : HistoryText(*versions));
    return 0;
  }});
}

void AddInspect(CLI::App& app, std::vector<Command>* out) {
  struct State {
    std::string path;
    InspectFileOptions file;
    InspectTableOptions table;
    bool json = false;
    std::string timestamp;
  };
  auto s = std::make_shared<State>();
  auto* cmd = app.add_subcommand(
      "inspect", "Describe a Parquet file (schema, row groups, pages, codecs, statistics) or a table (version, schema, files)");
  cmd->add_option("path", s->path, "Parquet file, table, or plain Parquet dataset (a directory or a glob): a path or a URI")
      ->required();
  cmd->add_flag("--pages", s->file.pages, "List every page of every column chunk (files)");
  cmd->add_flag("--json", s->json, "Print one JSON document");
  auto* version = cmd->add_option("--version", s->table.version, "Table version to describe (default: latest)");
  cmd->add_option("--timestamp", s->timestamp, kTimestampHelp)->excludes(version);
  out->push_back({cmd, [s]() -> int {
    // --json is one flag for files and tables.
    s->table.format = s->file.format = s->json ? DescriptionFormat::kJson : DescriptionFormat::kText;
    Status at = ResolveTimestamp(s->path, s->timestamp, &s->table.version);
    if (!at.ok()) return Fail(at);
    // A directory (or an object-store prefix holding a Delta log) is a table; anything else a
    // Parquet file.
    Result<std::string> description =
        NamesTable(s->path) ? InspectTable(s->path, s->table) : InspectParquetFile(s->path, s->file);
    if (!description.ok()) return Fail(description.status());
    std::fwrite(description->data(), 1, description->size(), stdout);
    return 0;
  }});
}

void AddCat(CLI::App& app, std::vector<Command>* out) {
  struct State {
    std::string path;
    std::string columns;
    std::string format{RowFormatName(RowFormat::kTable)};
    CatOptions options;
  };
  auto s = std::make_shared<State>();
  auto* cmd = app.add_subcommand("cat", "Print rows of a Parquet file, a table or a plain Parquet dataset (a "
                                        "directory or a glob); binary and tensor cells print as md5:<hex> len:<bytes>");
  cmd->add_option("path", s->path, "Parquet file, table directory or glob (a path or a URI)")->required();
  cmd->add_option("--columns", s->columns, "Comma-separated columns (default: all)");
  cmd->add_option("--offset", s->options.offset, "First row")->capture_default_str();
  cmd->add_option("--limit", s->options.limit, "Number of rows (-1 = all)")->capture_default_str();
  cmd->add_option("--format", s->format, "table, csv or json (one object per line)")
      ->check(CLI::IsMember({"table", "csv", "json"}))
      ->capture_default_str();
  out->push_back({cmd, [s]() -> int {
    s->options.columns = ColumnList(s->columns);
    auto format = ParseRowFormat(s->format);
    if (!format.ok()) return Fail(format.status());
    if (NamesTable(s->path)) {
      return PrintQuery({.table_dir = s->path, .select = s->options.columns, .limit = s->options.limit,
                         .offset = s->options.offset},
                        *format);
    }
    auto rows = CatParquetRows(s->path, s->options);
    if (!rows.ok()) return Fail(rows.status());
    const std::string text = RowsText(*rows, *format);
    std::fwrite(text.data(), 1, text.size(), stdout);
    return 0;
  }});
}

}  // namespace

void AddTableCommands(CLI::App& app, const Context& ctx, std::vector<Command>* out) {
  AddOptimize(app, ctx, out);
  AddVacuum(app, ctx, out);
  AddQuery(app, out);
  AddCheckpoint(app, out);
  AddHistory(app, out);
  AddInspect(app, out);
  AddCat(app, out);
}

}  // namespace stoke::cli

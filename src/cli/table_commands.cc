// The commands on a table or a Parquet file: optimize, vacuum, query, checkpoint, history, inspect and cat.
#include <CLI/CLI.hpp>

#include <cstdio>
#include <filesystem>
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

// --select / --columns: "a,b,c" as its names, in order (empty parts kept; "" is no list).
std::vector<std::string> ColumnList(const std::string& text) {
  std::vector<std::string> out;
  if (text.empty()) return out;
  size_t pos = 0;
  while (pos <= text.size()) {
    size_t comma = text.find(',', pos);
    out.push_back(text.substr(pos, comma == std::string::npos ? std::string::npos : comma - pos));
    if (comma == std::string::npos) break;
    pos = comma + 1;
  }
  return out;
}

// --format: table, csv or json (CLI11 has checked the name).
RowFormat OutputFormat(const std::string& name) {
  return name == "csv" ? RowFormat::kCsv : name == "json" ? RowFormat::kJson : RowFormat::kTable;
}

}  // namespace

void AddTableCommands(CLI::App& app, const Context& ctx, std::vector<Command>* out) {
  struct State {
    stoke::OptimizeOptions oo;
    std::string optimize_codec;  // "" = the table's
    stoke::VacuumOptions vo;
    stoke::QueryOptions qo;
    std::string query_select;
    std::string query_format = "table";
    std::string checkpoint_dir;
    std::optional<int64_t> checkpoint_version;
    std::string history_dir;
    stoke::HistoryOptions ho;
    std::string inspect_path;
    stoke::InspectFileOptions io;
    stoke::InspectTableOptions ito;
    std::string cat_path;
    std::string cat_columns;
    std::string cat_format = "table";
    stoke::CatOptions catopt;
  };
  auto s = std::make_shared<State>();
  auto& oo = s->oo;
  auto& vo = s->vo;
  auto& qo = s->qo;
  auto& query_select = s->query_select;
  auto& query_format = s->query_format;
  auto& checkpoint_dir = s->checkpoint_dir;
  auto& checkpoint_version = s->checkpoint_version;
  auto& history_dir = s->history_dir;
  auto& ho = s->ho;
  auto& inspect_path = s->inspect_path;
  auto& io = s->io;
  auto& ito = s->ito;
  auto& cat_path = s->cat_path;
  auto& cat_columns = s->cat_columns;
  auto& cat_format = s->cat_format;
  auto& catopt = s->catopt;
  // optimize
  auto* optimize = app.add_subcommand("optimize", "Compact a table's small files into files of the target size (one commit)");
  optimize->add_option("table", oo.table_dir, "Table: a directory, or a URI (az://container/path, abfss://, https://<account>.blob.core.windows.net/..., s3://bucket/path)")->required();
  optimize->add_option("--target-file-size", oo.target_file_bytes, "Size of the compacted files, e.g. 1GiB")
      ->transform(CLI::AsSizeValue(false))
      ->default_str("1GiB");
  optimize->add_option("--row-group-size", oo.row_group_bytes, "Row group size, e.g. 128MiB")
      ->transform(CLI::AsSizeValue(false))
      ->default_str("128MiB");
  optimize->add_option("--where", oo.where, "Only compact files whose statistics may match this predicate");
  optimize->add_option("--sort-by", oo.sort_by,
                       "Order rows by this scalar column within the new files (rewrites every matching file)");
  optimize->add_option("--codec", s->optimize_codec,
                       "Page codec of the new files (default: the table's own, as recorded at ingest; auto when none)");
  optimize->add_option("--threads", oo.threads, "Threads (0 = one per available CPU)")->capture_default_str();

  // vacuum
  auto* vacuum = app.add_subcommand("vacuum", "Delete data files no version inside the retention window references");
  vacuum->add_option("table", vo.table_dir, "Table: a directory, or a URI (az://container/path, abfss://, https://<account>.blob.core.windows.net/..., s3://bucket/path)")->required();
  vacuum->add_option("--retain", vo.retain_hours, "Retention in hours: versions newer than this stay readable")
      ->capture_default_str();
  vacuum->add_flag("--dry-run", vo.dry_run, "List the files that would be deleted; delete nothing");

  // query
  auto* query = app.add_subcommand("query", "Rows of a table matching a predicate, e.g. --where \"label = 1 AND x < 100\"");
  query->add_option("table", qo.table_dir, "Table: a directory, or a URI (az://container/path, abfss://, https://<account>.blob.core.windows.net/..., s3://bucket/path)")->required();
  query->add_option("--where", qo.where,
                    "Predicate over scalar columns: = != < <= > >= IN, NOT IN, BETWEEN, IS [NOT] NULL, AND, OR, NOT; "
                    "dates as DATE 'yyyy-mm-dd', timestamps as TIMESTAMP 'yyyy-mm-dd hh:mm:ss' (UTC unless a zone "
                    "follows), decimals as numbers");
  query->add_option("--select", query_select, "Comma-separated columns (default: all)");
  query->add_option("--limit", qo.limit, "At most N rows (-1 = all)")->capture_default_str();
  query->add_flag("--count", qo.count_only, "Print only the number of matching rows");
  query->add_option("--version", qo.version, "Query the table as of this version");
  query->add_option("--format", query_format, "table, csv or json (one object per line)")
      ->check(CLI::IsMember({"table", "csv", "json"}))
      ->capture_default_str();

  // checkpoint
  auto* checkpoint = app.add_subcommand("checkpoint", "Write a Delta checkpoint (commits write one every 10 versions)");
  checkpoint->add_option("table", checkpoint_dir, "Table: a directory, or a URI (az://container/path, abfss://, https://<account>.blob.core.windows.net/..., s3://bucket/path)")->required();
  checkpoint->add_option("--version", checkpoint_version, "Version to checkpoint (default: latest)");

  // history
  auto* history = app.add_subcommand("history", "List a table's versions, newest first");
  history->add_option("table", history_dir, "Table: a directory, or a URI (az://container/path, abfss://, https://<account>.blob.core.windows.net/..., s3://bucket/path)")->required();
  history->add_option("--limit", ho.limit, "Show at most N versions (0 = all)");
  history->add_flag("--json", ho.json, "One JSON object per version");

  // inspect
  auto* inspect = app.add_subcommand(
      "inspect", "Describe a Parquet file (schema, row groups, pages, codecs, statistics) or a table (version, schema, files)");
  inspect->add_option("path", inspect_path, "Parquet file or table (a path or a URI)")->required();
  inspect->add_flag("--pages", io.pages, "List every page of every column chunk (files)");
  inspect->add_flag("--json", io.json, "Print one JSON document");
  inspect->add_option("--version", ito.version, "Table version to describe (default: latest)");

  // cat
  auto* cat = app.add_subcommand("cat", "Print rows; binary and tensor cells print as md5:<hex> len:<bytes>");
  cat->add_option("file", cat_path, "Parquet file (a path or a URI)")->required();
  cat->add_option("--columns", cat_columns, "Comma-separated columns (default: all)");
  cat->add_option("--offset", catopt.offset, "First row")->capture_default_str();
  cat->add_option("--limit", catopt.limit, "Number of rows (-1 = all)")->capture_default_str();
  cat->add_option("--format", cat_format, "table, csv or json (one object per line)")
      ->check(CLI::IsMember({"table", "csv", "json"}))
      ->capture_default_str();

  // What runs when parsing found the command (the options above filled in).
  out->push_back({optimize, [s, &ctx]() -> int {
    auto& oo = s->oo;
    oo.progress = !ctx.no_progress;
    if (!s->optimize_codec.empty()) {
      auto codec = stoke::ParseCodec(s->optimize_codec);
      if (!codec.ok()) return Fail(codec.status());
      oo.codec = *codec;
    }
    auto r = stoke::OptimizeTable(oo);
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
  out->push_back({vacuum, [s, &ctx]() -> int {
    auto& vo = s->vo;
    vo.progress = !ctx.no_progress;
    auto r = stoke::VacuumTable(vo);
    if (!r.ok()) return Fail(r.status());
    for (const auto& f : r->files) std::printf("%s%s\n", vo.dry_run ? "would delete " : "deleted ", f.c_str());
    std::printf("vacuum: %s %zu files (%s); %lld files referenced by retained versions kept\n",
                vo.dry_run ? "would delete" : "deleted", r->files.size(), Mb(r->bytes).c_str(),
                static_cast<long long>(r->referenced_kept));
    return 0;
  }});
  out->push_back({query, [s]() -> int {
    auto& qo = s->qo;
    auto& query_select = s->query_select;
    auto& query_format = s->query_format;
    qo.select = ColumnList(query_select);
    qo.format = OutputFormat(query_format);
    auto r = stoke::QueryTable(qo, std::cout);
    return r.ok() ? 0 : Fail(r.status());
  }});
  out->push_back({checkpoint, [s]() -> int {
    auto& checkpoint_dir = s->checkpoint_dir;
    auto& checkpoint_version = s->checkpoint_version;
    stoke::Status s = stoke::CheckpointTable(checkpoint_dir, checkpoint_version);
    if (!s.ok()) return Fail(s);
    std::printf("checkpoint written\n");
    return 0;
  }});
  out->push_back({history, [s]() -> int {
    auto& history_dir = s->history_dir;
    auto& ho = s->ho;
    stoke::Status s = stoke::PrintTableHistory(history_dir, ho, std::cout);
    return s.ok() ? 0 : Fail(s);
  }});
  out->push_back({inspect, [s]() -> int {
    auto& inspect_path = s->inspect_path;
    auto& io = s->io;
    auto& ito = s->ito;
    ito.json = io.json;  // --json is one flag for files and tables
    // A directory (or an object-store prefix holding a Delta log) is a table; anything else a
    // Parquet file.
    std::error_code ec;
    stoke::Status s = std::filesystem::is_directory(inspect_path, ec) || stoke::IsTableDirectory(inspect_path)
                          ? stoke::InspectTable(inspect_path, ito, std::cout)
                          : stoke::InspectParquetFile(inspect_path, io, std::cout);
    return s.ok() ? 0 : Fail(s);
  }});
  out->push_back({cat, [s]() -> int {
    auto& cat_path = s->cat_path;
    auto& cat_columns = s->cat_columns;
    auto& cat_format = s->cat_format;
    auto& catopt = s->catopt;
    catopt.columns = ColumnList(cat_columns);
    catopt.format = OutputFormat(cat_format);
    stoke::Status s = stoke::CatParquetFile(cat_path, catopt, std::cout);
    return s.ok() ? 0 : Fail(s);
  }});
}

}  // namespace stoke::cli

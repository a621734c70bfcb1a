#include "core/progress.h"

#include <fmt/format.h>
#include <unistd.h>

#include <cstdio>

namespace stoke {

ProgressBar::ProgressBar(std::string label, uint64_t total_items, std::string unit, Mode mode)
    : label_(std::move(label)),
      unit_(std::move(unit)),
      total_items_(total_items),
      enabled_(mode == Mode::kOn || (mode == Mode::kAuto && isatty(STDOUT_FILENO) && isatty(STDERR_FILENO))),
      start_(std::chrono::steady_clock::now()),
      last_draw_(start_) {}

ProgressBar::~ProgressBar() { Finish(); }

double ProgressBar::elapsed_seconds() const {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start_).count();
}

void ProgressBar::Add(uint64_t items, uint64_t bytes) {
  items_.fetch_add(items, std::memory_order_relaxed);
  bytes_.fetch_add(bytes, std::memory_order_relaxed);
  if (!enabled_) return;
  if (!draw_mu_.TryLock()) return;  // another thread is drawing: this update shows in the next draw
  DrawIfDue();
  draw_mu_.Unlock();
}

void ProgressBar::DrawIfDue() {
  if (finished_) return;
  auto now = std::chrono::steady_clock::now();
  if (now - last_draw_ < std::chrono::milliseconds(100)) return;
  last_draw_ = now;
  Draw(false);
}

void ProgressBar::Finish() {
  MutexLock lock(&draw_mu_);
  if (finished_) return;
  finished_ = true;
  if (enabled_) Draw(true);
}

std::string ProgressBar::Render() const {
  double secs = elapsed_seconds();
  uint64_t items = items_.load();
  uint64_t bytes = bytes_.load();
  double rate = secs > 0 ? items / secs : 0;
  double mbps = secs > 0 ? bytes / secs / 1e6 : 0;
  std::string line = fmt::format("{}  {}", label_, items);
  if (total_items_ > 0) {
    line += fmt::format("/{} {}  {:.1f}%", total_items_, unit_, 100.0 * items / total_items_);
  } else {
    line += " " + unit_;
  }
  line += fmt::format("  {:.1f} {}/s  {:.1f} MB/s", rate, unit_, mbps);
  if (total_items_ > 0 && rate > 0 && items < total_items_) {
    line += "  ETA " + FormatDuration((total_items_ - items) / rate);
  } else if (items >= total_items_ && total_items_ > 0) {
    line += "  in " + FormatDuration(secs);
  }
  return line;
}

void ProgressBar::Draw(bool final_line) {
  std::string line = Render();
  std::fprintf(stderr, "\r\033[K%s%s", line.c_str(), final_line ? "\n" : "");
  std::fflush(stderr);
}

std::string FormatBytes(uint64_t bytes) {
  static const char* kUnits[] = {"B", "KiB", "MiB", "GiB", "TiB"};
  double v = static_cast<double>(bytes);
  int u = 0;
  while (v >= 1024 && u < 4) {
    v /= 1024;
    ++u;
  }
  return u == 0 ? fmt::format("{} B", bytes) : fmt::format("{:.1f} {}", v, kUnits[u]);
}

std::string FormatDuration(double seconds) {
  if (seconds < 0) seconds = 0;
  auto s = static_cast<uint64_t>(seconds + 0.5);
  if (s >= 3600) return fmt::format("{}h{:02}m", s / 3600, (s % 3600) / 60);
  if (s >= 60) return fmt::format("{}m{:02}s", s / 60, s % 60);
  if (seconds < 10) return fmt::format("{:.1f}s", seconds);
  return fmt::format("{}s", s);
}

}  // namespace stoke

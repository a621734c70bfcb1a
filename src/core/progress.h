// A progress bar for long CLI work: items/s, MB/s and ETA on one redrawn stderr line.
// It draws only when stdout and stderr are both terminals, so logs and pipes stay clean.
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <string>

#include "core/mutex.h"

namespace stoke {

// Thread-safe: Add() may be called from any thread. Redraws at most every 100 ms.
class ProgressBar {
 public:
  enum class Mode { kAuto, kOn, kOff };
  // total_items may be 0 when unknown (no ETA then). `unit` names the items ("files", "rows").
  ProgressBar(std::string label, uint64_t total_items, std::string unit = "files", Mode mode = Mode::kAuto);
  ~ProgressBar();  // calls Finish()
  ProgressBar(const ProgressBar&) = delete;
  ProgressBar& operator=(const ProgressBar&) = delete;

  void Add(uint64_t items, uint64_t bytes) EXCLUDES(draw_mu_);
  // Draws the final state and ends the line (once).
  void Finish() EXCLUDES(draw_mu_);
  bool enabled() const { return enabled_; }
  uint64_t items() const { return items_.load(); }
  uint64_t bytes() const { return bytes_.load(); }
  double elapsed_seconds() const;

  // The line as drawn, for tests: "label  120/2000 files  6.0%  310.2 files/s  109.8 MB/s  ETA 6s".
  std::string Render() const;

 private:
  void Draw(bool final_line) REQUIRES(draw_mu_);
  // Redraws when the last draw is 100 ms old, unless finished.
  void DrawIfDue() REQUIRES(draw_mu_);

  std::string label_;
  std::string unit_;
  uint64_t total_items_;
  bool enabled_;
  std::chrono::steady_clock::time_point start_;
  std::atomic<uint64_t> items_{0};
  std::atomic<uint64_t> bytes_{0};
  Mutex draw_mu_;  // serialises drawing
  std::chrono::steady_clock::time_point last_draw_ GUARDED_BY(draw_mu_);
  bool finished_ GUARDED_BY(draw_mu_) = false;
};

// "1.5 GiB", "360.0 KiB", "12 B".
std::string FormatBytes(uint64_t bytes);
// "1h02m", "3m05s", "12s".
std::string FormatDuration(double seconds);

}  // namespace stoke

#include "app/run/progress_bar.hpp"

#include <cstdio>
#include <iostream>

namespace moesim {
namespace {

std::string clock_text(double secs) {
  const long s = static_cast<long>(secs + 0.5);
  char buf[32];
  std::snprintf(buf, sizeof buf, "%ld:%02ld:%02ld", s / 3600, s / 60 % 60, s % 60);
  return buf;
}

}  // namespace

ProgressBar::ProgressBar(std::string name, std::string unit, std::size_t total, std::size_t done, bool enabled)
    : name_(std::move(name)), unit_(std::move(unit)), total_(total), done_(done), first_(done), enabled_(enabled) {}

std::string ProgressBar::render(const std::string& name, const std::string& unit, std::size_t total, std::size_t first,
                                std::size_t done, double elapsed_s) {
  constexpr std::size_t kWidth = 30;
  const std::size_t filled = total ? kWidth * std::min(done, total) / total : kWidth;
  std::string eta = "--:--:--";
  if (done > first && total >= done)
    eta = clock_text(elapsed_s / static_cast<double>(done - first) * static_cast<double>(total - done));
  return name + " [" + std::string(filled, '#') + std::string(kWidth - filled, '-') + "] " + std::to_string(done) + "/" +
         std::to_string(total) + " " + unit + "  elapsed " + clock_text(elapsed_s) + "  ETA " + eta;
}

void ProgressBar::advance(std::size_t n) {
  const std::lock_guard lock(mutex_);
  done_ += n;
  if (!enabled_) return;
  const auto now = Clock::now();
  if (done_ != total_ && now - drawn_ < std::chrono::milliseconds(100)) return;
  drawn_ = now;
  drawn_any_ = true;
  std::cerr << "\r" << render(name_, unit_, total_, first_, done_, std::chrono::duration<double>(now - start_).count())
            << std::flush;
}

void ProgressBar::finish() {
  const std::lock_guard lock(mutex_);
  if (drawn_any_) std::cerr << "\n" << std::flush;
  drawn_any_ = false;
}

}  // namespace moesim

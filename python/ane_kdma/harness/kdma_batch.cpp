// SPDX-License-Identifier: Apache-2.0
// Batch harness for kdma_top: many workloads through one Verilated model, no Python per task.
//
// Built by ane_kdma.engines.verilator once per (hypothesis build parameters,
// core count, Payload: the engine times the counters-only RTL, Payload = 0;
// this harness reads no line data, so it drives either build). It drives
// kdma_top exactly as tb/kdma_tb.py's run_workload does (settle idle cycles,
// start_i held high from the first task to the last, each task taken when
// ready_o, the span counted from the edge that takes the first task to the
// edge after which idle_o rises), with the KMem consumer always ready, and
// prints the counters the engine contract holds. The full build's top is
// kdma_top (KMEM_READY_PORT = 1); the counters-only build's is
// kdma_batch_top.sv (REGISTERED_TASK = 1): kdma_top with its inputs registered,
// so that no logic hangs off a top-level input (see the file), and the
// consumer tied ready. Its run-time settings are taken one cycle late (every
// workload starts after at least three settle cycles), and its task too: the
// harness presents each task one edge early (the first before one more idle
// cycle; the next, or start_i low, at the edge that takes the current one), so
// kdma_top sees the same tasks on the same cycles as with the inputs direct.
//
// stdin, one workload per line (whitespace separated):
//   SETTINGS_WORDS 32-bit words of the packed kdma_pkg::settings_t, least significant
//   first (ane_kdma.rtl_settings packs it from the one field table; the harness writes
//   it as it comes, and names no setting), then settle (idle cycles before the workload:
//   every token bucket full, at least three), steps, mask,
//   then, for each core in mask (lowest first), steps x (base_addr size_bytes)
// stdout, one line per workload:
//   span, then per core "-" (disabled) or "cycles zero_credit_cycles peak_inflight"
// Errors: "error: <why>" on stderr, exit status 1.
// With the argument --bare N it reads at most one workload, starts its first
// task and then only toggles the clock N cycles: the bench's floor (the same
// model streaming, no harness logic per cycle). It prints N.

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <string>
#include <type_traits>
#include <vector>

#include "Vkdma_top.h"
#include "verilated.h"

namespace {

constexpr int kCores = NUM_CORES;
constexpr int kSettingsBits = SETTINGS_BITS;  // $bits(kdma_pkg::settings_t)
constexpr int kSettingsWords = (kSettingsBits + 31) / 32;
constexpr uint64_t kMaxCycles = 1ull << CYCLE_BITS;  // the RTL's cycle counters

[[noreturn]] void die(const std::string& why) {
  std::fprintf(stderr, "error: %s\n", why.c_str());
  std::exit(1);
}

// Packed multi-lane ports: Verilator gives an integer up to 64 bits, VlWide above.
template <typename T>
typename std::enable_if<std::is_integral<T>::value>::type set_bits(T& p, int lo, int w,
                                                                   uint64_t v) {
  const uint64_t mask = (w >= 64) ? ~0ull : ((1ull << w) - 1);
  uint64_t x = static_cast<uint64_t>(p);
  x &= ~(mask << lo);
  x |= (v & mask) << lo;
  p = static_cast<T>(x);
}

template <typename T>
typename std::enable_if<std::is_integral<T>::value, uint64_t>::type get_bits(const T& p, int lo,
                                                                             int w) {
  const uint64_t mask = (w >= 64) ? ~0ull : ((1ull << w) - 1);
  return (static_cast<uint64_t>(p) >> lo) & mask;
}

template <std::size_t N>
void set_bits(VlWide<N>& p, int lo, int w, uint64_t v) {
  for (int b = 0; b < w; ++b) {
    const int i = lo + b;
    const uint32_t bit = 1u << (i % 32);
    if ((v >> b) & 1u) {
      p[i / 32] |= bit;
    } else {
      p[i / 32] &= ~bit;
    }
  }
}

template <std::size_t N>
uint64_t get_bits(const VlWide<N>& p, int lo, int w) {
  uint64_t v = 0;
  for (int b = 0; b < w; ++b) {
    const int i = lo + b;
    v |= static_cast<uint64_t>((p[i / 32] >> (i % 32)) & 1u) << b;
  }
  return v;
}

// Whitespace-separated unsigned integers from all of stdin.
class Reader {
 public:
  Reader() {
    char buf[1 << 16];
    size_t n;
    while ((n = std::fread(buf, 1, sizeof buf, stdin)) > 0) data_.append(buf, n);
  }
  bool more() {
    skip();
    return pos_ < data_.size();
  }
  uint64_t next() {
    skip();
    if (pos_ >= data_.size()) die("workload truncated");
    uint64_t v = 0;
    size_t start = pos_;
    while (pos_ < data_.size() && data_[pos_] >= '0' && data_[pos_] <= '9') {
      v = v * 10 + static_cast<uint64_t>(data_[pos_++] - '0');
      if (pos_ - start > 19) die("number too long");
    }
    if (pos_ == start) die("not a number in the workload list");
    return v;
  }

 private:
  void skip() {
    while (pos_ < data_.size() &&
           (data_[pos_] == ' ' || data_[pos_] == '\n' || data_[pos_] == '\t' || data_[pos_] == '\r'))
      ++pos_;
  }
  std::string data_;
  size_t pos_ = 0;
};

// The packed settings struct, as 32-bit words (least significant first), and the idle
// cycles to settle before a workload.
struct Settings {
  uint32_t words[kSettingsWords] = {};
  uint64_t settle = 0;
};

class Harness {
 public:
  Harness() : ctx_(new VerilatedContext), top_(new Vkdma_top{ctx_.get()}) {
    top_->clk_i = 0;
    top_->start_i = 0;
    top_->core_en_i = 0;
#if KMEM_READY_PORT
    set_bits(top_->kmem_ready_i, 0, kCores, ~0ull);  // the consumer is always ready
#endif
    top_->rst_ni = 0;
    top_->eval();
    tick();
    tick();
    top_->rst_ni = 1;
    top_->eval();
    tick();
  }
  ~Harness() { top_->final(); }

  void tick() {
    top_->clk_i = 1;
    top_->eval();
    top_->clk_i = 0;
    top_->eval();
    ++now_;
  }

  void bare(uint64_t cycles) {
    for (uint64_t i = 0; i < cycles; ++i) tick();
  }

  // Start one step's tasks (settings applied) and leave start_i low again.
  void kick(const Settings& s, uint32_t mask,
            const std::vector<std::vector<std::pair<uint64_t, uint64_t>>>& tasks) {
    apply(s);
    present(mask, tasks, 0);
    tick();
#if REGISTERED_TASK
    top_->start_i = 0;  // kdma_top sees the task from this edge on: the next one takes it
    top_->eval();
    tick();
#endif
    top_->start_i = 0;
    top_->eval();
  }

  // Drive task j of every core in mask (0 on the others), start_i high.
  void present(uint32_t mask, const std::vector<std::vector<std::pair<uint64_t, uint64_t>>>& tasks,
               uint64_t j) {
    for (int c = 0; c < kCores; ++c) {
      const bool on = (mask >> c) & 1u;
      set_bits(top_->base_addr_i, 32 * c, 32, on ? tasks[c][j].first : 0);
      set_bits(top_->size_bytes_i, 32 * c, 32, on ? tasks[c][j].second : 0);
    }
    set_bits(top_->core_en_i, 0, kCores, mask);
    top_->start_i = 1;
    top_->eval();
  }

  void apply(const Settings& s) {
    for (int i = 0; i < kSettingsWords; ++i) {
      const int w = (kSettingsBits - 32 * i < 32) ? kSettingsBits - 32 * i : 32;
      set_bits(top_->settings_i, 32 * i, w, s.words[i]);
    }
    top_->eval();
  }

  // One workload: tasks[c][j] = (base, size) for the cores in mask.
  std::string run(const Settings& s, uint64_t steps, uint32_t mask,
                  const std::vector<std::vector<std::pair<uint64_t, uint64_t>>>& tasks) {
    apply(s);
    bare(s.settle);
    if (!top_->idle_o) die("engine not idle before a workload");
    uint64_t t0 = 0;
#if REGISTERED_TASK
    present(mask, tasks, 0);
    tick();  // kdma_top sees task 0 from here (one more idle cycle: nothing moves)
#endif
    for (uint64_t j = 0; j < steps; ++j) {
#if !REGISTERED_TASK
      present(mask, tasks, j);
#endif
      const uint64_t since = now_;
      while (!top_->ready_o) {
        tick();
        if (now_ - since > kMaxCycles) die("a task was never taken");
      }
#if REGISTERED_TASK
      // the edge that takes task j registers what kdma_top sees after it
      if (j + 1 < steps) {
        present(mask, tasks, j + 1);
      } else {
        top_->start_i = 0;
        top_->eval();
      }
#endif
      tick();  // the edge that takes task j
      if (j == 0) t0 = now_;
    }
    top_->start_i = 0;
    top_->eval();
    do {
      tick();
      if (now_ - t0 >= kMaxCycles) die("the workload overflows the RTL's 32-bit cycle counters");
    } while (!top_->idle_o);
    std::string out = std::to_string(now_ - t0);
    const int pw = peak_width();
    for (int c = 0; c < kCores; ++c) {
      if (!((mask >> c) & 1u)) {
        out += " -";
        continue;
      }
      out += ' ' + std::to_string(get_bits(top_->core_cycles_o, 32 * c, 32));
      out += ' ' + std::to_string(get_bits(top_->zero_credit_cycles_o, 32 * c, 32));
      out += ' ' + std::to_string(get_bits(top_->peak_inflight_o, pw * c, pw));
    }
    tick();  // as the testbench does after reading the counters
    return out;
  }

  uint64_t now() const { return now_; }

 private:
  static constexpr int peak_width() { return PEAK_BITS; }
  std::unique_ptr<VerilatedContext> ctx_;
  std::unique_ptr<Vkdma_top> top_;
  uint64_t now_ = 0;
};

struct Workload {
  Settings s;
  uint64_t steps = 0;
  uint32_t mask = 0;
  std::vector<std::vector<std::pair<uint64_t, uint64_t>>> tasks;
};

Workload read_workload(Reader& in) {
  Workload w;
  Settings& s = w.s;
  for (int i = 0; i < kSettingsWords; ++i) {
    const uint64_t v = in.next();
    const int w = (kSettingsBits - 32 * i < 32) ? kSettingsBits - 32 * i : 32;
    if (v >> w) die("a settings word beyond the struct's width");
    s.words[i] = static_cast<uint32_t>(v);
  }
  s.settle = in.next();
  if (s.settle < 3) die("fewer than three settle cycles (the settings are registered)");
  w.steps = in.next();
  const uint64_t mask = in.next();
  if (w.steps == 0 || mask == 0 || (kCores < 32 && (mask >> kCores) != 0))
    die("bad step count or core mask");
  w.mask = static_cast<uint32_t>(mask);
  w.tasks.resize(kCores);
  for (int c = 0; c < kCores; ++c) {
    if (!((mask >> c) & 1u)) continue;
    w.tasks[c].resize(w.steps);
    for (uint64_t j = 0; j < w.steps; ++j) {
      const uint64_t base = in.next(), size = in.next();
      if (base >> 32 || size >> 32) die("base or size beyond 32 bits");
      w.tasks[c][j] = {base, size};
    }
  }
  return w;
}

}  // namespace

int main(int argc, char** argv) {
  Harness h;
  Reader in;
  if (argc == 3 && std::strcmp(argv[1], "--bare") == 0) {
    const uint64_t n = std::strtoull(argv[2], nullptr, 10);
    if (in.more()) {
      const Workload w = read_workload(in);
      h.kick(w.s, w.mask, w.tasks);
    }
    h.bare(n);
    std::printf("%llu\n", static_cast<unsigned long long>(n));
    return 0;
  }
  while (in.more()) {
    const Workload w = read_workload(in);
    const std::string out = h.run(w.s, w.steps, w.mask, w.tasks);
    std::fputs(out.c_str(), stdout);
    std::fputc('\n', stdout);
    std::fflush(stdout);
  }
  return 0;
}

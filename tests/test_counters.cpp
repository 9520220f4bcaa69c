// Hardware counters: the collector against a fake CUPTI backend (passes, value mapping, stall
// ranking, failures, a throwing pass), CUPTI's errors in words, the real backend where counters
// cannot work, and on the GPU the DRAM bytes of a copy.
#include <cuda_runtime_api.h>

#include <cmath>
#include <stdexcept>
#include <string>
#include <vector>

#include "check.h"
#include "counters.h"
#include "counters_cupti.h"
#include "image.h"
#include "support.h"

#if __has_include(<cupti_result.h>)
#include <cupti_result.h>
constexpr int kNoPermission = CUPTI_ERROR_INSUFFICIENT_PRIVILEGES;
#else
constexpr int kNoPermission = 35;  // CUPTI_ERROR_INSUFFICIENT_PRIVILEGES
#endif

using namespace lab;

namespace {

// What the collector asked of the fake.
struct Calls {
  int load = 0, begin = 0, begin_pass = 0, end_pass = 0, evaluate = 0, end = 0;
  size_t metrics = 0;
  std::vector<std::string> pushes;
  int pops = 0;
};

class FakeBackend : public CounterBackend {
 public:
  explicit FakeBackend(Calls& calls) : m_calls(calls) {}

  std::string load_error, begin_error;
  int passes = 1;
  std::vector<std::string> names;
  std::vector<std::vector<double>> values;

  std::string load() override {
    ++m_calls.load;
    return load_error;
  }
  std::string begin(const std::vector<std::string>& metrics, int, int& n) override {
    ++m_calls.begin;
    m_calls.metrics = metrics.size();
    n = passes;
    return begin_error;
  }
  std::string begin_pass() override {
    ++m_calls.begin_pass;
    return "";
  }
  void push_range(const std::string& name) override { m_calls.pushes.push_back(name); }
  void pop_range() override { ++m_calls.pops; }
  std::string end_pass(bool& done) override {
    done = ++m_calls.end_pass >= passes;
    return "";
  }
  std::string evaluate(std::vector<std::string>& n, std::vector<std::vector<double>>& v) override {
    ++m_calls.evaluate;
    n = names;
    v = values;
    return "";
  }
  void end() override { ++m_calls.end; }

 private:
  Calls& m_calls;
};

size_t metric_index(const std::string& name) {
  const std::vector<std::string>& m = counter_metrics();
  for (size_t i = 0; i < m.size(); ++i)
    if (m[i] == name) return i;
  FAIL("no metric " << name);
  return 0;
}

size_t stall_index(const std::string& reason) {
  return metric_index("smsp__average_warps_issue_stalled_" + reason + "_per_issue_active.ratio");
}

bool has_text(const std::string& s, const std::string& part) {
  return s.find(part) != std::string::npos;
}

}  // namespace

TEST_SUITE("cpu") {
  TEST_CASE("counters: the metric list, stall reasons and their words") {
    const std::vector<std::string>& m = counter_metrics();
    CHECK(m.size() ==
          14 + stall_reasons().size());  // 7 figures, 6 FLOP counts, instructions, stalls
    CHECK(m[0] == "sm__warps_active.avg.pct_of_peak_sustained_active");
    CHECK(m[6] == "gpu__time_duration.sum");
    CHECK(m[9] == "smsp__sass_thread_inst_executed_op_ffma_pred_on.sum");
    for (const std::string& r : stall_reasons()) {
      INFO(r);
      CHECK(stall_index(r) >= 7);
      const std::string w = stall_words(r);
      CHECK(w != r);
      CHECK(has_text(w, "("));  // the plain words end with ncu's name for it
    }
    CHECK(stall_words("long_scoreboard") == "waiting on global or local memory (long scoreboard)");
    CHECK(stall_words("no_such_reason") == "no_such_reason");
  }

  TEST_CASE("counters: CUPTI's errors in one line each") {
    const std::string denied = cupti_error_line(kNoPermission, "cuptiRangeProfilerEnable", "GH100");
    CHECK(has_text(denied, "counters unavailable: no permission"));
    CHECK(has_text(denied, "CUPTI_ERROR_INSUFFICIENT_PRIVILEGES"));
    CHECK(has_text(denied, "NVreg_RestrictProfilingToAdminUsers=0"));
    CHECK(denied.find('\n') == std::string::npos);
    CHECK(has_text(cupti_error_line(39, "cuptiProfilerInitialize", ""), "another profiler"));
    const std::string none = cupti_error_line(27, "cuptiRangeProfilerEnable", "GA10B");
    CHECK(has_text(none, "GA10B"));
    CHECK(has_text(none, "CUPTI_ERROR_NOT_SUPPORTED from cuptiRangeProfilerEnable"));
    CHECK(has_text(cupti_error_line(14, "cuptiRangeProfilerSetConfig", "GH100"), "no perf"));
    CHECK(cupti_error_line(999, "cuptiRangeProfilerStart", "GH100", "CUPTI_ERROR_UNKNOWN") ==
          "counters failed: cuptiRangeProfilerStart returned CUPTI_ERROR_UNKNOWN");
    CHECK(has_text(cupti_error_line(12345, "cuptiRangeProfilerStop", ""), "CUPTI error 12345"));
  }

  TEST_CASE("counters: a missing library makes counters unavailable, asked once") {
    Calls calls;
    auto fake = std::make_unique<FakeBackend>(calls);
    fake->load_error = "counters unavailable: libcupti not found (install it)";
    CounterCollector c(std::move(fake));
    CHECK(c.unavailable() == "counters unavailable: libcupti not found (install it)");
    int ran = 0;
    const CounterReport r = c.collect([&](RangeSink&) { ++ran; });
    CHECK_FALSE(r.ok);
    CHECK(r.why == c.unavailable());
    CHECK(r.ranges.empty());
    CHECK(calls.load == 1);
    CHECK(calls.begin == 0);
    CHECK(calls.end == 0);
    CHECK(ran == 0);
  }

  TEST_CASE("counters: a refused permission at begin is the privileges line, and ends") {
    Calls calls;
    auto fake = std::make_unique<FakeBackend>(calls);
    fake->begin_error = cupti_error_line(kNoPermission, "cuptiRangeProfilerEnable", "GH100");
    CounterCollector c(std::move(fake));
    CHECK(c.unavailable().empty());
    int ran = 0;
    const CounterReport r = c.collect([&](RangeSink&) { ++ran; });
    CHECK_FALSE(r.ok);
    CHECK(has_text(r.why, "NVreg_RestrictProfilingToAdminUsers=0"));
    CHECK(ran == 0);
    CHECK(calls.begin_pass == 0);
    CHECK(calls.end == 1);
  }

  TEST_CASE("counters: three passes, values by metric index, top stalls") {
    Calls calls;
    auto fake = std::make_unique<FakeBackend>(calls);
    fake->passes = 3;
    const size_t n = counter_metrics().size();
    std::vector<double> a(n, 0.0);
    a[metric_index("sm__warps_active.avg.pct_of_peak_sustained_active")] = 61.5;
    a[metric_index("dram__bytes_read.sum")] = 1e6;
    a[metric_index("dram__bytes_write.sum")] = NAN;  // a metric the chip lacks
    a[metric_index("lts__t_sector_hit_rate.pct")] = 12;
    a[metric_index("sm__throughput.avg.pct_of_peak_sustained_elapsed")] = 30;
    a[metric_index("gpu__compute_memory_throughput.avg.pct_of_peak_sustained_elapsed")] = 90;
    a[metric_index("gpu__time_duration.sum")] = 4500;
    a[metric_index("smsp__sass_thread_inst_executed_op_fadd_pred_on.sum")] = 10;
    a[metric_index("smsp__sass_thread_inst_executed_op_fmul_pred_on.sum")] = 20;
    a[metric_index("smsp__sass_thread_inst_executed_op_ffma_pred_on.sum")] = 30;
    a[metric_index("smsp__sass_thread_inst_executed_op_dadd_pred_on.sum")] = 1;
    a[metric_index("smsp__sass_thread_inst_executed_op_dmul_pred_on.sum")] = 2;
    a[metric_index("smsp__sass_thread_inst_executed_op_dfma_pred_on.sum")] = 3;
    a[metric_index("smsp__inst_executed.sum")] = 4096;
    a[stall_index("selected")] = 9;  // the largest, but not a stall
    a[stall_index("long_scoreboard")] = 5;
    a[stall_index("wait")] = 7;
    a[stall_index("barrier")] = 2;
    a[stall_index("misc")] = 1;
    a[stall_index("drain")] = NAN;
    fake->names = {"blur", "sobel"};
    fake->values = {a, {50.0, 2e6}};  // the second row short: the rest reads NaN
    CounterCollector c(std::move(fake));

    int ran = 0, ticks = 0;
    c.on_pass = [&] { CHECK(ticks++ < ran); };  // after each pass's work, never before
    const CounterReport r = c.collect([&](RangeSink& ranges) {
      ++ran;
      ranges.push("blur");
      ranges.pop();
      ranges.push("sobel");
      ranges.pop();
    });
    REQUIRE_MESSAGE(r.ok, r.why);
    CHECK(r.passes == 3);
    CHECK(ran == 3);
    CHECK(ticks == 3);
    CHECK(calls.begin_pass == 3);
    CHECK(calls.end_pass == 3);
    CHECK(calls.evaluate == 1);
    CHECK(calls.end == 1);
    CHECK(calls.metrics == n);
    CHECK(calls.pushes.size() == 6);
    CHECK(calls.pops == 6);
    CHECK(r.ms >= 0);

    REQUIRE(r.ranges.size() == 2);
    const CounterValues& b = r.ranges[0];
    CHECK(b.range == "blur");
    CHECK(b.achieved_occupancy_pct == 61.5);
    CHECK(b.dram_read_bytes == 1e6);
    CHECK(std::isnan(b.dram_write_bytes));
    CHECK(b.l2_hit_pct == 12);
    CHECK(b.sm_throughput_pct == 30);
    CHECK(b.mem_throughput_pct == 90);
    CHECK(b.duration_ns == 4500);
    CHECK(b.fp32_flops == 10 + 20 + 2 * 30);  // an FMA is two operations
    CHECK(b.fp64_flops == 1 + 2 + 2 * 3);
    REQUIRE(b.top_stalls.size() == 3);
    CHECK(b.top_stalls[0].metric == "wait");
    CHECK(b.top_stalls[0].per_issue == 7);
    CHECK(b.top_stalls[1].metric == "long_scoreboard");
    CHECK(b.top_stalls[1].words == stall_words("long_scoreboard"));
    CHECK(b.top_stalls[2].metric == "barrier");
    CHECK(b.inst_executed == 4096);
    REQUIRE(b.stalls.size() == 4);  // every stall above 0, "selected" and NaN left out
    CHECK(b.stalls[3].metric == "misc");

    const CounterValues& s = r.ranges[1];
    CHECK(s.range == "sobel");
    CHECK(s.achieved_occupancy_pct == 50);
    CHECK(s.dram_read_bytes == 2e6);
    CHECK(std::isnan(s.l2_hit_pct));
    CHECK(std::isnan(s.duration_ns));
    CHECK(std::isnan(s.fp32_flops));
    CHECK(s.top_stalls.empty());
  }

  TEST_CASE("counters: a pass that throws ends the session, then the exception propagates") {
    Calls calls;
    auto fake = std::make_unique<FakeBackend>(calls);
    fake->passes = 2;
    CounterCollector c(std::move(fake));
    CHECK_THROWS_AS(c.collect([](RangeSink& ranges) {
      ranges.push("bad");
      throw std::runtime_error("illegal address");
    }),
                    std::runtime_error);
    CHECK(calls.begin_pass == 1);
    CHECK(calls.end_pass == 0);
    CHECK(calls.evaluate == 0);
    CHECK(calls.end == 1);
  }

  TEST_CASE("counters: the settle after a session runs once a collection, in the collector only") {
    Calls calls;
    int settles = 0;
    auto fake = std::make_unique<FakeBackend>(calls);
    fake->passes = 3;
    CounterCollector c(std::move(fake), [&] { ++settles; });
    c.collect([](RangeSink&) {});
    CHECK(calls.end_pass == 3);
    CHECK(calls.end == 1);
    CHECK(settles == 1);  // three passes, one session, one settle
    CHECK_THROWS_AS(c.collect([](RangeSink&) { throw std::runtime_error("illegal address"); }),
                    std::runtime_error);
    CHECK(settles == 2);  // also when the pass throws
    Calls none;
    auto missing = std::make_unique<FakeBackend>(none);
    missing->load_error = "counters unavailable: libcupti not found";
    int unsettled = 0;
    CounterCollector u(std::move(missing), [&] { ++unsettled; });
    CHECK_FALSE(u.collect([](RangeSink&) {}).ok);
    CHECK(unsettled == 0);  // no session began
  }

  TEST_CASE("counters: a backend that never submits its last pass stops") {
    Calls calls;
    auto fake = std::make_unique<FakeBackend>(calls);
    fake->passes = 1000;
    CounterCollector c(std::move(fake));
    const CounterReport r = c.collect([](RangeSink&) {});
    CHECK_FALSE(r.ok);
    CHECK(has_text(r.why, "64"));
    CHECK(calls.begin_pass == 64);
    CHECK(calls.evaluate == 0);
    CHECK(calls.end == 1);
  }

  TEST_CASE("counters: the real backend says why it cannot collect, and never crashes") {
    CounterCollector c;
    const std::string why = c.unavailable();
    if (why.empty()) return;  // counters work here: the GPU suite measures them
    MESSAGE(why);
    CHECK(why.rfind("counters ", 0) == 0);
    CHECK(why.find('\n') == std::string::npos);
    if (!device_info().present) {
      CHECK(why.rfind("counters unavailable: ", 0) == 0);
      CHECK((has_text(why, "libcupti") || has_text(why, "no CUDA device") ||
             has_text(why, "range profiler")));
    }
    CHECK(c.unavailable() == why);
    int ran = 0;
    const CounterReport r = c.collect([&](RangeSink&) { ++ran; });
    CHECK_FALSE(r.ok);
    CHECK(r.why == why);
    CHECK(ran == 0);
  }
}

TEST_SUITE("gpu") {
  LAB_GPU_CASE("counters: a 512 MiB device copy reads and writes 512 MiB of DRAM") {
    CounterCollector c;
    if (!c.unavailable().empty()) {
      MESSAGE("not measured: " << c.unavailable());
      return;
    }
    // Far larger than the L2 (50-60 MB on an H100/H200), so nearly every byte goes to DRAM.
    const size_t bytes = size_t(512) << 20;
    DeviceBuffer src(bytes), dst(bytes);
    LAB_CUDA_CHECK(cudaMemset(src.data(), 1, bytes));
    LAB_CUDA_CHECK(cudaDeviceSynchronize());
    auto copy = [&](RangeSink& ranges) {
      ranges.push("copy");
      LAB_CUDA_CHECK(
          cudaMemcpyAsync(dst.data(), src.data(), bytes, cudaMemcpyDeviceToDevice, nullptr));
      ranges.pop();
      LAB_CUDA_CHECK(cudaStreamSynchronize(nullptr));
    };
    // Twice: a second session in the same process must work as the first did.
    for (int round = 0; round < 2; ++round) {
      CAPTURE(round);
      int ran = 0;
      const CounterReport r = c.collect([&](RangeSink& ranges) {
        ++ran;
        copy(ranges);
      });
      REQUIRE_MESSAGE(r.ok, r.why);
      CHECK(ran == r.passes);
      REQUIRE(r.ranges.size() == 1);
      const CounterValues& v = r.ranges[0];
      MESSAGE("passes " << r.passes << ", " << r.ms << " ms; read " << v.dram_read_bytes
                        << " B, written " << v.dram_write_bytes << " B, L2 hit " << v.l2_hit_pct
                        << " %, occupancy " << v.achieved_occupancy_pct << " %, SM "
                        << v.sm_throughput_pct << " %, memory " << v.mem_throughput_pct << " %, "
                        << v.duration_ns << " ns");
      for (const StallReason& s : v.top_stalls) MESSAGE(s.metric << " " << s.per_issue);
      CHECK(v.range == "copy");
      CHECK(std::abs(v.dram_read_bytes / double(bytes) - 1) < 0.02);
      CHECK(std::abs(v.dram_write_bytes / double(bytes) - 1) < 0.02);
    }
    // A name used again in a pass (a scan's levels launch one kernel twice) is a range of its
    // own, in launch order: CUPTI alone would count the three as one.
    const CounterReport same = c.collect([&](RangeSink& ranges) {
      for (int k = 0; k < 3; ++k) {
        ranges.push("memset");
        LAB_CUDA_CHECK(cudaMemsetAsync(dst.data(), k, size_t(64) << (20 + k), nullptr));
        ranges.pop();
      }
      LAB_CUDA_CHECK(cudaStreamSynchronize(nullptr));
    });
    REQUIRE_MESSAGE(same.ok, same.why);
    REQUIRE(same.ranges.size() == 3);
    for (int k = 0; k < 3; ++k) {
      const CounterValues& v = same.ranges[size_t(k)];
      CHECK(v.range == "memset");
      // 64, 128, 256 MiB written: each range its own launch's bytes (an H100: 1.8 % under at
      // 64 MiB, the L2 holding the tail; a merged range would be 7x at the first).
      MESSAGE("memset " << k << ": " << v.dram_write_bytes << " B written");
      CHECK(std::abs(v.dram_write_bytes / double(size_t(64) << (20 + k)) - 1) < 0.05);
    }
    // Past max_ranges CUPTI drops ranges without a word; the backend refuses instead.
    const CounterReport over = c.collect(
        [&](RangeSink& ranges) {
          for (int k = 0; k < 3; ++k) {
            ranges.push("memset");
            LAB_CUDA_CHECK(cudaMemsetAsync(dst.data(), k, size_t(1) << 20, nullptr));
            ranges.pop();
          }
          LAB_CUDA_CHECK(cudaStreamSynchronize(nullptr));
        },
        2);
    CHECK_FALSE(over.ok);
    CHECK(has_text(over.why, "more than 2 ranges"));
  }
}

// "Why is this step faster?": the rules on facts built here, one per honest case and per family
// of rules.
#include <doctest/doctest.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <set>
#include <sstream>

#include <nlohmann/json.hpp>

#include "check.h"
#include "explain.h"
#include "occupancy.h"
#include "registry.h"
#include "support.h"

using namespace lab;

namespace {

// A memory-bound naive step: 27.4 MB read from DRAM, long-scoreboard stalls.
StepFacts naive() {
  StepFacts f;
  f.name = "v1_naive 32x8 precise";
  f.us = 41.2, f.noise = 0.003;
  f.model_bytes = 7.5e6;
  f.launches = 1;
  f.counted = true;
  f.dram_read = 27.4e6, f.dram_write = 3.8e6, f.l2_hit_pct = 40;
  f.achieved_occ = 0.80, f.theoretical_occ = 1.0, f.limiter = "warps";
  f.sm_pct = 20, f.mem_pct = 84;
  f.inst_executed = 2.0e6;
  f.stalls = {{"long_scoreboard", 4.1}, {"lg_throttle", 1.0}};
  f.regs = 32, f.smem = 0, f.local_bytes = 0;
  f.mix.fill(0);
  f.mix[size_t(MixClass::LdGlobal)] = 24;
  f.mix[size_t(MixClass::Fp32)] = 30;
  return f;
}

// The tiled step: each input pixel read once from DRAM, its reuse from shared memory.
StepFacts tiled() {
  StepFacts f = naive();
  f.name = "v2_tile 32x8 precise";
  f.delta = "a shared-memory tile: each input pixel read once, reused 9 times";
  f.us = 13.3;
  f.dram_read = 8.8e6, f.l2_hit_pct = 45;
  f.sm_pct = 30, f.mem_pct = 35;
  f.inst_executed = 1.6e6;
  f.stalls = {{"long_scoreboard", 0.9}, {"barrier", 0.6}};
  f.smem = 1600;
  f.mix[size_t(MixClass::LdGlobal)] = 4;
  f.mix[size_t(MixClass::LdShared)] = 18;
  return f;
}

bool has(const std::string& s, const std::string& part) {
  return s.find(part) != std::string::npos;
}

const ExplainChange* find_change(const Explanation& e, const std::string& rule) {
  for (const ExplainChange& c : e.changes)
    if (c.rule == rule) return &c;
  return nullptr;
}

}  // namespace

TEST_SUITE("cpu") {
  TEST_CASE("explain: the rules table names each quantity once, with a direction and words") {
    std::set<std::string> ids;
    for (const ExplainRule& r : explain_rules()) {
      INFO(r.id);
      CHECK(ids.insert(r.id).second);
      CHECK(!r.quantity.empty());
      CHECK(!r.why.empty());
      CHECK(r.min_rel > 0);
      CHECK(r.weight > 0);
      CHECK(r.faster >= -1);
      CHECK(r.faster <= 1);
      CHECK(r.get);
      CHECK(r.show);
    }
    for (const char* id :
         {"dram_read", "dram_write", "l2_miss", "inst_executed", "achieved_occ", "theoretical_occ",
          "local_bytes", "stall:long_scoreboard", "mix:ld global"})
      CHECK_MESSAGE(ids.count(id), id);
  }

  TEST_CASE("explain: a tiled step is faster because DRAM reads fell; words joined to its delta") {
    const Explanation e = explain(naive(), tiled());
    CHECK(e.verdict == Verdict::Faster);
    CHECK(e.ratio == doctest::Approx(41.2 / 13.3));
    CHECK(has(e.headline, "3.10x faster"));
    const ExplainChange* top = e.top();
    REQUIRE(top);
    // A was memory bound: memory rules weigh 1.5x, so the DRAM reads lead the long-scoreboard
    // stalls, which fell further (4.6x against 3.1x).
    CHECK(top->rule == "dram_read");
    CHECK(top->measured);
    CHECK(has(top->sentence, "DRAM reads fell 3.1x, from 27.4 MB to 8.8 MB"));
    const ExplainChange* stall = find_change(e, "stall:long_scoreboard");
    REQUIRE(stall);
    CHECK(stall->explains);
    CHECK(has(stall->sentence,
              "long scoreboard stalls (waiting on global or local memory) per instruction fell "
              "4.6x, from 4.10 to 0.90"));
    CHECK(stall->score > find_change(e, "stall:lg_throttle")->score);
    const ExplainChange* ldg = find_change(e, "mix:ld global");
    REQUIRE(ldg);
    CHECK(ldg->explains);
    // Shared loads rose: they cost issue slots, so they moved against the time.
    const ExplainChange* lds = find_change(e, "mix:ld shared");
    REQUIRE(lds);
    CHECK_FALSE(lds->explains);
    // Shared memory per block is context: it never explains on its own.
    const ExplainChange* smem = find_change(e, "smem");
    REQUIRE(smem);
    CHECK_FALSE(smem->explains);
    // Unchanged quantities are not listed; the DRAM writes did not move.
    CHECK_FALSE(find_change(e, "dram_write"));
    CHECK(has(e.regime, "the limiter moved from memory bandwidth"));
    CHECK(has(e.regime, "to latency"));
    const std::string text = explanation_text(e);
    CHECK(has(text, "B's step: a shared-memory tile"));
    CHECK(has(text, "Why, ranked:\n  1. DRAM reads fell"));
    CHECK(e.notes.empty());
  }

  TEST_CASE("explain: a step that is slower here says so, and why: registers cut occupancy") {
    StepFacts a = tiled(), b = tiled();
    a.theoretical_occ = 0.5, a.achieved_occ = 0.45, a.regs = 40, a.limiter = "registers";
    b.name = "v3_unrolled 32x8 precise";
    b.us = 18.0, b.regs = 72, b.theoretical_occ = 0.25, b.achieved_occ = 0.22;
    b.limiter = "registers";
    const Explanation e = explain(a, b);
    CHECK(e.verdict == Verdict::Slower);
    CHECK(has(e.headline, "this step is slower here"));
    const ExplainChange* top = e.top();
    REQUIRE(top);
    CHECK((top->rule == "achieved_occ" || top->rule == "theoretical_occ"));
    const ExplainChange* t = find_change(e, "theoretical_occ");
    REQUIRE(t);
    CHECK(t->explains);  // it fell, and B is the slower: it explains the slowdown
    CHECK(has(t->sentence, "theoretical occupancy fell from 50 % to 25 % (limited by registers)"));
    CHECK(has(t->sentence, "registers per thread 40 -> 72"));
  }

  TEST_CASE("explain: a difference within the noise is called that, and nothing explains it") {
    StepFacts a = tiled(), b = tiled();
    a.noise = 0.004, b.noise = 0.005;
    b.us = a.us * 1.008;
    b.dram_read = a.dram_read * 0.7;  // moved, but the time did not
    const Explanation e = explain(a, b);
    CHECK(e.verdict == Verdict::Noise);
    CHECK(has(e.headline, "within the noise of the two measurements"));
    CHECK_FALSE(e.top());
    REQUIRE(find_change(e, "dram_read"));
    CHECK(has(explanation_text(e), "Moved all the same:"));
    // Past twice the combined noise (1.3 %), it is a difference.
    b.us = a.us * 1.05;
    CHECK(explain(a, b).verdict == Verdict::Slower);
  }

  TEST_CASE("explain: without counters, time, bytes and static facts only, and a note says so") {
    StepFacts a = naive(), b = tiled();
    for (StepFacts* f : {&a, &b}) {
      f->counted = false;
      f->counters_why = "counters unavailable: no permission";
      f->dram_read = f->dram_write = f->l2_hit_pct = f->achieved_occ = NAN;
      f->sm_pct = f->mem_pct = f->inst_executed = NAN;
      f->stalls.clear();
    }
    b.model_bytes = 3.0e6;
    const Explanation e = explain(a, b);
    CHECK(e.verdict == Verdict::Faster);
    for (const ExplainChange& c : e.changes) {
      INFO(c.rule);
      CHECK(c.rule.rfind("stall:", 0) != 0);
      CHECK(c.rule != "dram_read");
    }
    // Nothing measured moved: the bytes model and the static SASS mix explain, and neither is
    // called a measurement (an unrolled loop has more loads in its code and executes fewer).
    const ExplainChange* top = e.top();
    REQUIRE(top);
    CHECK_FALSE(top->measured);
    CHECK(top->rule == "model_bytes");
    REQUIRE(find_change(e, "mix:ld global"));
    CHECK(find_change(e, "mix:ld global")->explains);
    CHECK_FALSE(find_change(e, "mix:ld global")->measured);
    REQUIRE(e.notes.size() == 1);
    CHECK(has(e.notes[0],
              "counters unavailable (counters unavailable: no permission): the "
              "explanation uses time, bytes and the static facts only"));
    CHECK(e.regime.empty());
  }

  TEST_CASE("explain: a quantity where higher is faster explains a speedup when it rose") {
    StepFacts a = tiled(), b = tiled();
    a.achieved_occ = 0.30, a.theoretical_occ = 0.375, a.limiter = "shared memory";
    b.us = a.us / 1.5, b.achieved_occ = 0.70, b.theoretical_occ = 0.75, b.limiter = "warps";
    const Explanation e = explain(a, b);
    CHECK(e.verdict == Verdict::Faster);
    const ExplainChange* top = e.top();
    REQUIRE(top);
    CHECK(top->rule == "achieved_occ");
    CHECK(has(top->sentence, "achieved occupancy rose from 30 % to 70 %"));
    const ExplainChange* t = find_change(e, "theoretical_occ");
    REQUIRE(t);
    CHECK(t->explains);
    CHECK(has(t->sentence, "(limited by shared memory, then by warps)"));
  }

  TEST_CASE("explain: a ladder's steps, each against the one before") {
    const std::vector<Explanation> es = explain_steps({naive(), tiled(), tiled()});
    REQUIRE(es.size() == 2);
    CHECK(es[0].verdict == Verdict::Faster);
    CHECK(es[0].a.name == naive().name);
    CHECK(es[1].verdict == Verdict::Noise);
    CHECK(explain_steps({naive()}).empty());
  }

  TEST_CASE("explain: a time that is not known is said so, not called noise") {
    StepFacts a = tiled(), b = tiled();
    b.us = NAN;
    const Explanation e = explain(a, b);
    CHECK(e.verdict == Verdict::Unknown);
    CHECK(has(e.headline, "not known"));
    CHECK_FALSE(e.top());
  }

  TEST_CASE("explain: spills, launches and a missing SASS mix") {
    StepFacts a = tiled(), b = tiled();
    b.us = 30, b.local_bytes = 96, b.launches = 2;
    b.mix.fill(NAN), b.mix_why = "cuobjdump was not found";
    const Explanation e = explain(a, b);
    CHECK(e.verdict == Verdict::Slower);
    const ExplainChange* spill = find_change(e, "local_bytes");
    REQUIRE(spill);
    CHECK(spill->explains);
    CHECK(has(spill->sentence, "rose from 0 B to 96 B"));
    const ExplainChange* launches = find_change(e, "launches");
    REQUIRE(launches);
    CHECK(launches->explains);
    CHECK_FALSE(find_change(e, "mix:ld global"));  // unknown on one side: not compared
    bool noted = false;
    for (const std::string& n : e.notes) noted = noted || has(n, "cuobjdump was not found");
    CHECK(noted);
  }

  TEST_CASE("explain: nothing moved enough: the explanation says what it cannot separate") {
    StepFacts a = tiled(), b = tiled();
    b.us = a.us / 1.3;
    const Explanation e = explain(a, b);
    CHECK(e.verdict == Verdict::Faster);
    CHECK_FALSE(e.top());
    REQUIRE(!e.notes.empty());
    CHECK(has(e.notes.back(), "no quantity the lab reads moved enough"));
  }

  TEST_CASE("explain: a step's facts: counters summed, weighted by duration or instructions") {
    LadderStep st;
    st.cfg.op = &find_op("blur");
    st.cfg.variant = size_t(st.cfg.op->find_variant("v4_rows"));
    st.cfg.block = {32, 8};
    st.model_bytes = 7.5e6;
    static const int kernel = 0;  // any address: an own kernel, not a library call
    for (int n = 0; n < 2; ++n) {
      LaunchTiming l;
      l.rec.func = &kernel;
      l.rec.attrs.regs = n ? 40 : 32;
      l.rec.attrs.local_bytes = 8;
      l.rec.est.occupancy = 0.75;
      l.rec.est.limiter = Limiter::Registers;
      st.meas.launches.push_back(l);
    }
    st.meas.total.median_us = 12.5, st.meas.total.noise = 0.004;
    // Without counters: why, and the static facts all the same.
    StepFacts f = step_facts(st, false);
    CHECK(f.name == "v4_rows 32x8 precise");
    CHECK(f.delta == st.cfg.variant_def().delta);
    CHECK(f.us == 12.5);
    CHECK(f.launches == 2);
    CHECK_FALSE(f.counted);
    CHECK(f.counters_why == "counters were not collected");
    CHECK(std::isnan(f.dram_read));
    CHECK(f.regs == 40);  // the most of the step's kernels
    CHECK(f.local_bytes == 8);
    CHECK(f.theoretical_occ == 0.75);
    CHECK(f.limiter == "registers");
    CHECK(std::isnan(f.mix[0]));
    // With counters: bytes and instructions summed; L2 hit rate and throughputs weighted by
    // duration; stalls per instruction weighted by instructions (a reason one launch lacks is 0).
    CounterValues a, b;
    a.dram_read_bytes = 1e6, a.dram_write_bytes = 2e5, b.dram_read_bytes = 3e6,
    b.dram_write_bytes = 0;
    a.duration_ns = 1000, b.duration_ns = 3000;
    a.l2_hit_pct = 80, b.l2_hit_pct = 40;
    a.sm_throughput_pct = 20, b.sm_throughput_pct = 60;
    a.mem_throughput_pct = 90, b.mem_throughput_pct = 30;
    a.achieved_occupancy_pct = 50, b.achieved_occupancy_pct = 70;
    a.inst_executed = 1000, b.inst_executed = 3000;
    a.stalls = {{"long_scoreboard", "", 4.0}};
    b.stalls = {{"long_scoreboard", "", 2.0}, {"barrier", "", 1.0}};
    st.counted = true;
    st.counters.report.ok = true;
    st.counters.report.ranges = {a, b};
    f = step_facts(st, false);
    CHECK(f.counted);
    CHECK(f.dram_read == 4e6);
    CHECK(f.dram_write == 2e5);
    CHECK(f.inst_executed == 4000);
    CHECK(f.l2_hit_pct == doctest::Approx((80 * 1000 + 40 * 3000) / 4000.0));
    CHECK(f.sm_pct == doctest::Approx(50));
    CHECK(f.mem_pct == doctest::Approx(45));
    CHECK(f.achieved_occ == doctest::Approx(0.65));
    CHECK(f.stalls.at("long_scoreboard") == doctest::Approx((4.0 * 1000 + 2.0 * 3000) / 4000));
    CHECK(f.stalls.at("barrier") == doctest::Approx(3000 / 4000.0));
    CHECK(f.stalls.count("wait") == 0);
  }

  TEST_CASE("explain: facts survive their JSON; a malformed file is a data error") {
    const Explanation e = explain(naive(), tiled());
    const auto back = facts_from_json(explanation_json({e}));
    REQUIRE(back.size() == 1);
    const Explanation again = explain(back[0].first, back[0].second);
    CHECK(again.headline == e.headline);
    REQUIRE(again.changes.size() == e.changes.size());
    for (size_t k = 0; k < e.changes.size(); ++k)
      CHECK(again.changes[k].sentence == e.changes[k].sentence);
    CHECK(std::isnan(back[0].first.mix[size_t(MixClass::Mufu)]) == false);
    CHECK_THROWS_AS(facts_from_json("{"), Error);
    CHECK_THROWS_AS(facts_from_json("{\"a\": 1}"), Error);
    CHECK_THROWS_AS(facts_from_json("[{\"a\": {}}]"), Error);
  }

  // The recorded ladders (tests/data/explain: `explain --lab L --ladder all --json` on the GPU
  // host): for every consecutive step whose time moved by more than 10 %, the top-ranked change is
  // a measured quantity that moved in the direction that explains it.
  TEST_CASE("explain: on the recorded GPU ladders, every >10 % step has a measured top reason") {
    const std::filesystem::path dir = std::filesystem::path(LAB_DATA_DIR) / "explain";
    std::error_code ec;
    size_t files = 0, steps = 0, moved = 0;
    for (const auto& entry : std::filesystem::directory_iterator(dir, ec)) {
      if (entry.path().extension() != ".json") continue;
      ++files;
      for (const auto& [a, b] : facts_from_json(slurp(entry.path().string()))) {
        ++steps;
        const Explanation e = explain(a, b);
        const std::string what = entry.path().filename().string() + ": " + a.name + " -> " + b.name;
        INFO(what);
        CHECK(a.counted);
        if (std::fabs(std::log(e.ratio)) <= std::log(1.1)) continue;
        ++moved;
        const ExplainChange* top = e.top();
        REQUIRE(top);
        CHECK(top->measured);
        CHECK(top->explains);
        const int dir = e.ratio > 1 ? +1 : -1;
        const ExplainRule* rule = nullptr;
        for (const ExplainRule& r : explain_rules())
          if (r.id == top->rule) rule = &r;
        REQUIRE(rule);
        CHECK((top->b > top->a ? +1 : -1) * rule->faster * dir > 0);
      }
    }
    MESSAGE(files << " recorded files, " << steps << " steps, " << moved << " moved >10 %");
    CHECK(files > 0);
    CHECK(moved > 0);
  }
}

TEST_SUITE("gpu") {
  // The numbers an explanation ranks are the numbers `bench --counters` prints for the same
  // configurations, measured in the same run (the same measuring path; bytes and hit rates move
  // a little between two replays, registers not at all).
  LAB_GPU_CASE("explain: its numbers are bench --counters' numbers") {
    const std::string dir = "/tmp/lab_explain_" + std::to_string(getpid());
    shell("rm -rf " + dir + " && mkdir -p " + dir);
    const std::string in = " --input " + data_path("dock.jpg") + " --reps 20";
    const Result e = lab_cli(
        "explain" + in + " blur=v1_naive_2d blur=v4_rows --json --no-sass -o " + dir + "/e.json",
        180);
    INFO(e.out);
    REQUIRE(e.code == 0);
    const auto pairs = facts_from_json(slurp(dir + "/e.json"));
    REQUIRE(pairs.size() == 1);
    for (const StepFacts* f : {&pairs[0].first, &pairs[0].second}) {
      const std::string variant = f->name.substr(0, f->name.find(' '));
      INFO(variant);
      REQUIRE(f->counted);
      const Result b = lab_cli("bench" + in + " --stage blur --variant blur=" + variant +
                                   " --counters --json --out " + dir + "/b.json",
                               180);
      INFO(b.out);
      REQUIRE(b.code == 0);
      const auto j = nlohmann::json::parse(slurp(dir + "/b.json"));
      double read = 0, write = 0;
      int regs = 0, n = 0;
      for (const auto& l : j.at("launches")) {
        if (l.at("stage") != "blur" || !l.contains("counters")) continue;
        ++n;
        read += l["counters"]["dram_read_bytes"].get<double>();
        write += l["counters"]["dram_write_bytes"].get<double>();
        regs = std::max(regs, l["regs"].get<int>());
      }
      REQUIRE(n == f->launches);
      CHECK(regs == f->regs);
      // Within 5 %, or 64 kB where the bytes are few: a 3.7 MB output can stay in the 50 MB L2,
      // and what is written back during the range is then a few sectors, not the output.
      const auto near = [](double a, double b) {
        return std::fabs(a - b) <= std::max(0.05 * std::max(a, b), 65536.0);
      };
      CHECK_MESSAGE(near(f->dram_read, read), f->dram_read << " vs " << read);
      CHECK_MESSAGE(near(f->dram_write, write), f->dram_write << " vs " << write);
      MESSAGE(variant << ": explain reads " << f->dram_read << " B, bench " << read << " B");
    }
    shell("rm -rf " + dir);
  }
}

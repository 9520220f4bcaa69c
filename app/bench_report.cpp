#include "bench_report.h"

#include "json_number.h"

#include <nlohmann/json.hpp>

#include <algorithm>
#include <cmath>
#include <cstdio>

namespace lab::app {

BenchRow bench_row(const ResolvedStage& s, const std::string& kernel) {
  BenchRow row;
  row.stage = s.op->def.name;
  row.variant = s.variant_def().name;
  row.block = s.block.str();
  row.math = math_name(s.math);
  row.kernel = kernel;
  return row;
}

namespace {
std::string mb(double bytes) {
  return std::isfinite(bytes) ? fmt("%.2f MB", bytes / 1e6) : "-";
}
std::string pct(double v) {
  return std::isfinite(v) ? fmt("%.1f%%", v) : "-";
}

// State columns after the existing ones: numbers bare (empty when missing), texts quoted.
void state_csv(std::ostream& out, const DeviceState& a, const DeviceState& b) {
  for (const StateColumn& c : state_columns(a, b)) {
    out << ",";
    if (!c.is_text) {
      if (std::isfinite(c.num)) out << c.num;
      continue;
    }
    out << '"';
    for (char ch : c.text) out << (ch == '"' ? "\"\"" : std::string(1, ch));
    out << '"';
  }
}

// A row that times the whole stage: its only launch, or the total of several.
bool stage_level(const BenchRow& r, const std::vector<BenchRow>& rows) {
  if (r.total) return true;
  for (const BenchRow& o : rows)
    if (o.total && o.stage == r.stage && o.variant == r.variant && o.block == r.block &&
        o.math == r.math)
      return false;
  return true;
}
}  // namespace

nlohmann::json state_json(const DeviceState& a, const DeviceState& b) {
  nlohmann::json j;
  for (const StateColumn& c : state_columns(a, b))
    j[c.name] = c.is_text ? (c.text.empty() ? nlohmann::json(nullptr) : nlohmann::json(c.text))
                          : json_number(c.num);
  j["start"] = a.summary();
  j["end"] = b.summary();
  return j;
}

std::string counters_line(const BenchRow& r) {
  const CounterValues& c = r.counters;
  std::string s = "counters:";
  if (!r.total && !r.library)
    s += " achieved occupancy " + pct(c.achieved_occupancy_pct) + " (theoretical " +
         pct(100 * r.rec.est.occupancy) + "),";
  else if (!r.total)
    s += " achieved occupancy " + pct(c.achieved_occupancy_pct) + ",";
  s += " DRAM read " + mb(c.dram_read_bytes) + ", written " + mb(c.dram_write_bytes);
  if (r.model_bytes > 0) s += " (model " + mb(r.model_bytes) + ")";
  if (r.total) return s;
  s += ", L2 hit " + pct(c.l2_hit_pct) + ", SM " + pct(c.sm_throughput_pct) + " and memory " +
       pct(c.mem_throughput_pct) + " of peak";
  if (!c.top_stalls.empty()) {
    s += "; stalls:";
    for (size_t k = 0; k < c.top_stalls.size(); ++k)
      s += (k ? ", " : " ") + c.top_stalls[k].words + fmt(" %.2f", c.top_stalls[k].per_issue);
  }
  return s;
}

void add_ceiling(std::vector<BenchRow>& rows, const Op& op, double flops) {
  double best = 0;
  for (BenchRow& r : rows) {
    if (r.stage != op.def.name || !stage_level(r, rows)) continue;
    if (flops > 0) r.gflops = flops / (r.median_us * 1e-6) / 1e9;
    const int v = op.find_variant(r.variant);
    if (v >= 0 && op.def.variants[size_t(v)].ceiling && (best == 0 || r.median_us < best))
      best = r.median_us;
  }
  if (best > 0)
    for (BenchRow& r : rows)
      if (r.stage == op.def.name && stage_level(r, rows)) r.pct_ceiling = 100 * best / r.median_us;
}

std::string story_text(const Op& op, const std::vector<BenchRow>& rows) {
  std::string s = op.def.name + ": " + op.def.story + "\n";
  std::string ceiling;
  for (const VariantDef& v : op.def.variants)
    if (v.ceiling && ceiling.empty()) ceiling = v.name;
  for (const VariantDef& v : op.def.variants) {
    const BenchRow* best = nullptr;
    for (const BenchRow& r : rows)
      if (r.stage == op.def.name && r.variant == v.name && stage_level(r, rows) &&
          (!best || r.median_us < best->median_us))
        best = &r;
    s += "  " + v.name + ": " + v.delta + "\n";
    if (!v.expect.empty()) s += "      expect: " + v.expect + "\n";
    if (!best) {
      s += "      measured: not run\n";
      continue;
    }
    s += "      measured: " + fmt("%.2f us", best->median_us) + " (block " + best->block + ", " +
         best->math + ")";
    if (best->gflops > 0) s += ", " + fmt("%.0f GFLOP/s", best->gflops);
    if (best->gbs > 0)
      s += ", " + fmt("%.0f GB/s", best->gbs) + fmt(" (%.0f%% of copy)", best->pct_copy);
    if (best->pct_ceiling >= 0 && !v.ceiling)
      s += ", " + fmt("%.1f%%", best->pct_ceiling) + " of " + ceiling;
    s += "\n";
  }
  return s;
}

std::string state_footer(const std::vector<BenchRow>& rows,
                         const std::vector<FrameTiming>& frames) {
  std::vector<const DeviceState*> starts, ends;
  std::vector<std::string> warnings;
  auto take = [&](const DeviceState& a, const DeviceState& b) {
    if (a.source == DeviceState::Source::None && a.source_why.empty()) return;  // not recorded
    starts.push_back(&a), ends.push_back(&b);
    for (const std::string& w : state_warnings(a, b))
      if (std::find(warnings.begin(), warnings.end(), w) == warnings.end()) warnings.push_back(w);
  };
  for (const BenchRow& r : rows) take(r.state_start, r.state_end);
  for (const FrameTiming& f : frames) take(f.state_start, f.state_end);
  if (starts.empty()) return "";
  std::string s = "device state at the first measurement's start: " + starts.front()->summary() +
                  "\ndevice state at the last measurement's end: " + ends.back()->summary() + "\n";
  for (const std::string& w : warnings) s += "! " + w + "\n";
  return s;
}

void print_rows(std::ostream& out, const std::vector<BenchRow>& rows, const BenchOptions& o,
                double copy_gbs, const std::string& header, const std::vector<FrameTiming>& frames,
                const std::string& story) {
  if (o.json) {
    nlohmann::json j;
    j["header"] = header;
    if (!story.empty()) j["story"] = story;
    j["copy_bandwidth_gbs"] = copy_gbs;
    for (const FrameTiming& f : frames) {
      j[f.key + "_median_us"] = f.median_us;
      j[f.key + "_p95_us"] = f.p95_us;
      j[f.key + "_what"] = f.what;
      if (f.state_start.source != DeviceState::Source::None || !f.state_start.source_why.empty())
        j[f.key + "_state"] = state_json(f.state_start, f.state_end);
    }
    for (const auto& r : rows) {
      j["launches"].push_back({{"stage", r.stage},
                               {"variant", r.variant},
                               {"block", r.block},
                               {"math", r.math},
                               {"kernel", r.kernel},
                               {"total", r.total},
                               {"in_frame", r.in_frame},
                               {"library", r.library},
                               {"median_us", r.median_us},
                               {"p95_us", r.p95_us},
                               {"gbs", r.gbs},
                               {"pct_copy", r.pct_copy},
                               {"pct_copy_same_size", r.pct_copy_same},
                               {"gflops", r.gflops},
                               {"pct_ceiling", r.pct_ceiling},
                               {"regs", r.rec.attrs.regs},
                               {"static_smem", r.rec.attrs.static_smem},
                               {"local_bytes", r.rec.attrs.local_bytes},
                               {"blocks_per_sm", r.rec.blocks_per_sm},
                               {"occupancy", r.rec.est.occupancy},
                               {"limiter", limiter_name(r.rec.est.limiter)},
                               {"orin_occupancy", r.rec.orin.occupancy},
                               {"orin_limiter", limiter_name(r.rec.orin.limiter)},
                               {"orin_registers_from_sm87_build", r.rec.orin_from_sm87_build},
                               {"model_bytes", r.model_bytes},
                               {"orin_estimate_us", json_number(r.orin_estimate_us())},
                               {"noise", json_number(r.noise)},
                               {"reps", r.reps},
                               {"runs", r.rec.runs},
                               {"state", state_json(r.state_start, r.state_end)}});
      if (r.has_counters) {
        const CounterValues& c = r.counters;
        nlohmann::json stalls = nlohmann::json::array();
        for (const StallReason& st : c.top_stalls)
          stalls.push_back({{"reason", st.metric},
                            {"words", st.words},
                            {"per_issue", json_number(st.per_issue)}});
        j["launches"].back()["counters"] = {
            {"achieved_occupancy_pct", json_number(c.achieved_occupancy_pct)},
            {"dram_read_bytes", json_number(c.dram_read_bytes)},
            {"dram_write_bytes", json_number(c.dram_write_bytes)},
            {"l2_hit_pct", json_number(c.l2_hit_pct)},
            {"sm_throughput_pct", json_number(c.sm_throughput_pct)},
            {"mem_throughput_pct", json_number(c.mem_throughput_pct)},
            {"top_stalls", stalls}};
      }
    }
    out << j.dump(2) << "\n";
    return;
  }
  if (o.csv) {
    out << "stage,variant,block,math,kernel,median_us,p95_us,gbs,pct_copy,pct_copy_same_size,"
           "gflops,pct_ceiling,regs,static_smem,"
           "local_bytes,blocks_per_sm,occupancy,limiter,orin_occupancy,orin_limiter,model_bytes,"
           "orin_estimate_us,noise,reps,achieved_occupancy_pct,dram_read_bytes,dram_write_bytes,"
           "l2_hit_pct,sm_throughput_pct,mem_throughput_pct,stall1,stall1_per_issue,stall2,"
           "stall2_per_issue,stall3,stall3_per_issue,in_frame";
    for (const std::string& n : state_column_names()) out << "," << n;
    out << ",runs\n";
    for (const auto& r : rows) {
      out << r.stage << "," << r.variant << "," << r.block << "," << r.math << ",\"" << r.kernel
          << "\"," << r.median_us << "," << r.p95_us << "," << r.gbs << "," << r.pct_copy << ","
          << r.pct_copy_same << "," << r.gflops << "," << r.pct_ceiling << "," << r.rec.attrs.regs
          << "," << r.rec.attrs.static_smem << "," << r.rec.attrs.local_bytes << ","
          << r.rec.blocks_per_sm << "," << r.rec.est.occupancy << ","
          << limiter_name(r.rec.est.limiter) << "," << r.rec.orin.occupancy << ","
          << limiter_name(r.rec.orin.limiter) << "," << r.model_bytes << "," << r.orin_estimate_us()
          << "," << r.noise << "," << r.reps;
      const CounterValues& c = r.counters;
      if (r.has_counters) {
        out << "," << c.achieved_occupancy_pct << "," << c.dram_read_bytes << ","
            << c.dram_write_bytes << "," << c.l2_hit_pct << "," << c.sm_throughput_pct << ","
            << c.mem_throughput_pct;
        for (size_t k = 0; k < 3; ++k)
          if (k < c.top_stalls.size())
            out << "," << c.top_stalls[k].metric << "," << c.top_stalls[k].per_issue;
          else
            out << ",,";
      } else {
        out << ",,,,,,,,,,,,";
      }
      out << "," << (r.in_frame ? 1 : 0);
      state_csv(out, r.state_start, r.state_end);
      out << ",\"" << r.rec.runs << "\"\n";
    }
    return;
  }
  out << header;
  char line[512];
  std::snprintf(
      line, sizeof line,
      "%-10s %-17s %-6s %-7s %-32s %9s %9s %8s %6s %6s %8s %6s %8s %4s %6s %5s %4s %5s %-9s "
      "%5s %-9s\n",
      "stage", "variant", "block", "math", "kernel", "med_us", "p95_us", "GB/s", "%copy", "%cp=sz",
      "GFLOP/s", "%ceil", "orin_us~", "regs", "smem", "local", "blk", "occ", "limiter", "orin",
      "orin_lim");
  out << line;
  bool frame_heading = false;
  std::string last_runs;
  for (const auto& r : rows) {
    if (r.in_frame && !frame_heading) {
      frame_heading = true;
      out << "each launch inside the whole frame (stage by stage, an event pair per launch: what "
             "the GUI's Timings panel shows):\n";
    }
    const bool one = r.gbs > 0;
    const std::string gb = one ? fmt("%.1f", r.gbs) : "-";
    const std::string pc = one ? fmt("%.1f%%", r.pct_copy) : "-";
    const std::string ps = one ? fmt("%.1f%%", r.pct_copy_same) : "-";
    const std::string gf = r.gflops > 0 ? fmt("%.0f", r.gflops) : "-";
    const std::string ce = r.pct_ceiling >= 0 ? fmt("%.1f%%", r.pct_ceiling) : "-";
    const std::string oe =
        std::isfinite(r.orin_estimate_us()) ? fmt("%.1f", r.orin_estimate_us()) : "-";
    if (r.library) {  // a library call: its own kernels, timed as one
      std::snprintf(line, sizeof line,
                    "%-10s %-17s %-6s %-7s %-32s %9.2f %9.2f %8s %6s %6s %8s %6s %8s (library: "
                    "its own launches)\n",
                    r.stage.c_str(), r.variant.c_str(), r.block.c_str(), r.math.c_str(),
                    r.kernel.c_str(), r.median_us, r.p95_us, gb.c_str(), pc.c_str(), ps.c_str(),
                    gf.c_str(), ce.c_str(), oe.c_str());
    } else if (r.total) {
      std::snprintf(line, sizeof line,
                    "%-10s %-17s %-6s %-7s %-32s %9.2f %9.2f %8s %6s %6s %8s %6s %8s\n",
                    r.stage.c_str(), r.variant.c_str(), r.block.c_str(), r.math.c_str(),
                    "(stage total)", r.median_us, r.p95_us, gb.c_str(), pc.c_str(), ps.c_str(),
                    gf.c_str(), ce.c_str(), oe.c_str());
    } else {
      std::snprintf(line, sizeof line,
                    "%-10s %-17s %-6s %-7s %-32s %9.2f %9.2f %8s %6s %6s %8s %6s %8s %4d %6zu "
                    "%5zu %4d %4.0f%% %-9s %4.0f%% %-9s\n",
                    r.stage.c_str(), r.variant.c_str(), r.block.c_str(), r.math.c_str(),
                    r.kernel.c_str(), r.median_us, r.p95_us, gb.c_str(), pc.c_str(), ps.c_str(),
                    gf.c_str(), ce.c_str(), oe.c_str(), r.rec.attrs.regs, r.rec.attrs.static_smem,
                    r.rec.attrs.local_bytes, r.rec.blocks_per_sm, 100 * r.rec.est.occupancy,
                    limiter_name(r.rec.est.limiter), 100 * r.rec.orin.occupancy,
                    limiter_name(r.rec.orin.limiter));
    }
    std::string text = line;
    if (!r.state_warnings().empty()) text.insert(text.size() - 1, " !");  // see the footer
    out << text;
    if (r.has_counters) out << "    " << counters_line(r) << "\n";
    // Once per stage and configuration: its launches all carry it.
    const std::string runs_key = r.stage + r.variant + r.block + r.math + r.rec.runs;
    if (!r.rec.runs.empty() && runs_key != last_runs)
      out << "    runs " << r.rec.runs << " (this step's own code does not run here)\n";
    last_runs = runs_key;
  }
  for (const FrameTiming& f : frames)
    out << "pipeline (configured variants), " << f.what << ": median " << fmt("%.2f", f.median_us)
        << " us, p95 " << fmt("%.2f", f.p95_us) << " us"
        << (state_warnings(f.state_start, f.state_end).empty() ? "" : " !") << "\n";
  out << state_footer(rows, frames);
  if (!story.empty()) out << "\n" << story;
}

}  // namespace lab::app

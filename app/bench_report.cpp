#include "app/bench_report.h"

#include <nlohmann/json.hpp>

#include <cstdio>

namespace lab::app {

std::string fmt(const char* format, double v) {
  char buf[64];
  std::snprintf(buf, sizeof buf, format, v);
  return buf;
}

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
    }
    for (const auto& r : rows)
      j["launches"].push_back({{"stage", r.stage},
                               {"variant", r.variant},
                               {"block", r.block},
                               {"math", r.math},
                               {"kernel", r.kernel},
                               {"total", r.total},
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
                               {"orin_registers_from_sm87_build", r.rec.orin_from_sm87_build}});
    out << j.dump(2) << "\n";
    return;
  }
  if (o.csv) {
    out << "stage,variant,block,math,kernel,median_us,p95_us,gbs,pct_copy,pct_copy_same_size,"
           "gflops,pct_ceiling,regs,static_smem,"
           "local_bytes,blocks_per_sm,occupancy,limiter,orin_occupancy,orin_limiter\n";
    for (const auto& r : rows)
      out << r.stage << "," << r.variant << "," << r.block << "," << r.math << ",\"" << r.kernel
          << "\"," << r.median_us << "," << r.p95_us << "," << r.gbs << "," << r.pct_copy << ","
          << r.pct_copy_same << "," << r.gflops << "," << r.pct_ceiling << "," << r.rec.attrs.regs
          << "," << r.rec.attrs.static_smem << "," << r.rec.attrs.local_bytes << ","
          << r.rec.blocks_per_sm << "," << r.rec.est.occupancy << ","
          << limiter_name(r.rec.est.limiter) << "," << r.rec.orin.occupancy << ","
          << limiter_name(r.rec.orin.limiter) << "\n";
    return;
  }
  out << header;
  char line[512];
  std::snprintf(
      line, sizeof line,
      "%-10s %-17s %-6s %-7s %-32s %9s %9s %8s %6s %6s %8s %6s %4s %6s %5s %4s %5s %-9s %5s "
      "%-9s\n",
      "stage", "variant", "block", "math", "kernel", "med_us", "p95_us", "GB/s", "%copy", "%cp=sz",
      "GFLOP/s", "%ceil", "regs", "smem", "local", "blk", "occ", "limiter", "orin", "orin_lim");
  out << line;
  for (const auto& r : rows) {
    const bool one = r.gbs > 0;
    const std::string gb = one ? fmt("%.1f", r.gbs) : "-";
    const std::string pc = one ? fmt("%.1f%%", r.pct_copy) : "-";
    const std::string ps = one ? fmt("%.1f%%", r.pct_copy_same) : "-";
    const std::string gf = r.gflops > 0 ? fmt("%.0f", r.gflops) : "-";
    const std::string ce = r.pct_ceiling >= 0 ? fmt("%.1f%%", r.pct_ceiling) : "-";
    if (r.library) {  // a library call: its own kernels, timed as one
      std::snprintf(line, sizeof line,
                    "%-10s %-17s %-6s %-7s %-32s %9.2f %9.2f %8s %6s %6s %8s %6s (library: its "
                    "own launches)\n",
                    r.stage.c_str(), r.variant.c_str(), r.block.c_str(), r.math.c_str(),
                    r.kernel.c_str(), r.median_us, r.p95_us, gb.c_str(), pc.c_str(), ps.c_str(),
                    gf.c_str(), ce.c_str());
    } else if (r.total) {
      std::snprintf(
          line, sizeof line, "%-10s %-17s %-6s %-7s %-32s %9.2f %9.2f %8s %6s %6s %8s %6s\n",
          r.stage.c_str(), r.variant.c_str(), r.block.c_str(), r.math.c_str(), "(stage total)",
          r.median_us, r.p95_us, gb.c_str(), pc.c_str(), ps.c_str(), gf.c_str(), ce.c_str());
    } else {
      std::snprintf(line, sizeof line,
                    "%-10s %-17s %-6s %-7s %-32s %9.2f %9.2f %8s %6s %6s %8s %6s %4d %6zu %5zu %4d "
                    "%4.0f%% %-9s %4.0f%% %-9s\n",
                    r.stage.c_str(), r.variant.c_str(), r.block.c_str(), r.math.c_str(),
                    r.kernel.c_str(), r.median_us, r.p95_us, gb.c_str(), pc.c_str(), ps.c_str(),
                    gf.c_str(), ce.c_str(), r.rec.attrs.regs, r.rec.attrs.static_smem,
                    r.rec.attrs.local_bytes, r.rec.blocks_per_sm, 100 * r.rec.est.occupancy,
                    limiter_name(r.rec.est.limiter), 100 * r.rec.orin.occupancy,
                    limiter_name(r.rec.orin.limiter));
    }
    out << line;
  }
  for (const FrameTiming& f : frames)
    out << "pipeline (configured variants), " << f.what << ": median " << fmt("%.2f", f.median_us)
        << " us, p95 " << fmt("%.2f", f.p95_us) << " us\n";
  if (!story.empty()) out << "\n" << story;
}

}  // namespace lab::app

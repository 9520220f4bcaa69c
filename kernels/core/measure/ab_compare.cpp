#include "ab_compare.h"

#include <algorithm>
#include <cmath>

namespace lab {

HostImage abs_difference(const HostImage& a, const HostImage& b) {
  const ImageDesc& d = a.desc();
  if (d != b.desc() || d.type != PixelType::F32 || d.channels != 1) return HostImage();
  HostImage out(d);
  const auto x = a.view<const float>(), y = b.view<const float>();
  auto o = out.view<float>();
  for (int r = 0; r < d.height; ++r)
    for (int c = 0; c < d.width; ++c) o.at(c, r) = std::abs(y.at(c, r) - x.at(c, r));
  return out;
}

namespace {

AbSide run_side(Runner& r, size_t i, const ResolvedStage& cfg, const MeasureOptions& m,
                CounterCollector* counters, CopyCeiling& copy, const std::function<void()>& tick) {
  AbSide s;
  r.poison_outputs(i, &cfg);  // an unwritten value shows as NaN in both diffs
  s.step = measure_step(r, i, cfg, m, counters, copy);
  if (tick) tick();
  for (const std::string& name : cfg.outputs()) s.outputs.push_back(r.read_slot(name));
  if (cfg.reference()) s.vs_reference = r.compare(i, r.reference(i, &cfg), cfg.math, &cfg);
  if (tick) tick();
  return s;
}

Tolerance tolerance_of(const ResolvedStage& s) {
  return s.math == MathMode::Fast ? s.op->def.tol_fast : s.op->def.tol_precise;
}

}  // namespace

AbCompare compare_ab(Runner& r, size_t i, const ResolvedStage& a, const ResolvedStage& b,
                     const MeasureOptions& m, CounterCollector* counters,
                     const std::function<void()>& tick) {
  if (a.op != b.op && a.op->def.name != b.op->def.name)
    throw Error(ErrorKind::Usage, "A/B: A runs " + a.op->def.name + " and B " + b.op->def.name +
                                      ": pin A on the same stage");
  AbCompare c;
  c.stage = i;
  c.output_names = b.outputs();  // the op's own first: A's and B's line up on those
  CopyCeiling copy;
  const MeasureOptions opts = step_options(r, m);
  fill_fused_slots(r, i);  // an unfused B reads slots a fused A's pipeline never wrote
  try {
    c.a = run_side(r, i, a, opts, counters, copy, tick);
    c.b = run_side(r, i, b, opts, counters, copy, tick);
  } catch (...) {
    r.run_stage(i);
    throw;
  }
  r.run_stage(i);  // the configured output back
  const Tolerance ta = tolerance_of(a), tb = tolerance_of(b);
  const Tolerance loose{std::max(ta.abs, tb.abs), std::max(ta.rel, tb.rel)};
  bool first = true;
  for (size_t k = 0; k < c.a.outputs.size() && k < c.b.outputs.size(); ++k) {
    const HostImage &oa = c.a.outputs[k], &ob = c.b.outputs[k];
    if (oa.desc() != ob.desc()) {
      c.a_vs_b.fail = c.output_names[k] + ": A is " + oa.desc().str() + ", B " + ob.desc().str();
      c.difference.push_back(HostImage());
      continue;
    }
    const DiffStats d = diff_images(ob, oa, loose, c.output_names[k]);
    if (first)
      c.a_vs_b = d, first = false;
    else
      merge_diff(c.a_vs_b, d);
    c.difference.push_back(abs_difference(oa, ob));
  }
  return c;
}

}  // namespace lab

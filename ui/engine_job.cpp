// The GUI's engine job: one frame of the engine on a worker thread (configure, upload, the
// timed run exactly as bench times it, the copies the viewport shows, sweeps, diffs, counters),
// and the UI-thread side that starts jobs and takes their results. The shell (gui.cpp) calls
// engine_frame() once per UI frame.
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <future>
#include <thread>

#include "app_state.h"
#include "keypoint_slots.h"
#include "measure.h"
#include "stats.h"
#include "widgets.h"

namespace lab::ui {

// Starts the next engine job when none is running; takes a finished job's result.
void engine_frame(GuiApp& app, bool wait) {
  using Clock = std::chrono::steady_clock;
  if (app.job.valid()) {
    // The UI never waits on the GPU for long: a scripted run waits for its job up to the hang
    // limit, an interactive one not at all. A job still running past the limit is reported, and
    // the panels that show its results say they are stale.
    // A ladder runs many steps in one job: it is hung only when no step ended for that long
    // (a scripted run waits for the whole ladder, step by step).
    const auto hang = std::chrono::milliseconds(int64_t(1e3 * app.opt.hang_report_s));
    auto limit = app.job_started + hang;
    bool ready = false;
    // A long job (a ladder, an A/B compare) is hung only when no part of it ended for that long.
    const JobProgress* progress = app.ui.ladder.running ? app.ui.ladder.progress.get()
                                  : app.ui.ab.running   ? app.ui.ab.progress.get()
                                                        : nullptr;
    // A scripted run waits for a long job while its parts keep ending within a minute: a step's
    // host work (a counter session's set-up, cuobjdump for the SASS mix) can run for seconds
    // with the GPU idle (a matmul ladder with counters on the H100 went 6 s without a part
    // ending). The UI, which never waits, calls a job stale after the hang limit as before.
    const auto patience =
        wait && progress ? std::max<Clock::duration>(hang, std::chrono::seconds(60)) : hang;
    for (;;) {
      if (progress) {
        const Clock::time_point step(Clock::duration(progress->last_step_ns.load()));
        limit = std::max(app.job_started, step) + patience;
      }
      ready = app.job.wait_until(wait && app.stale.empty() ? limit : Clock::now()) ==
              std::future_status::ready;
      if (ready || !wait || !progress || Clock::now() >= limit) break;
    }
    if (!ready) {
      if (progress && Clock::now() < limit) return;  // its parts are still ending
      const double s = std::chrono::duration<double>(Clock::now() - app.job_started).count();
      if (s >= app.opt.hang_report_s) {
        // Which launch it waits on: asked of the GPU once (its end events), not every frame.
        if (app.stale.empty()) app.stale_launch = app.runner->first_unfinished_launch();
        const std::string& at = app.stale_launch;
        char buf[160];
        std::snprintf(buf, sizeof buf, "frame %llu has been running for %.0f s",
                      (unsigned long long)app.job_number, s);
        app.stale = std::string(buf) +
                    (app.opt.backend == Backend::Cpu && app.opt.hooks.simulate_hang_at == 0
                         ? " (the CPU references are slow at this size)"
                     : at.empty() ? " (the GPU has not finished it)"
                                  : ": waiting on " + at);
        // The first frame after starting again waits on the driver, not on a kernel of this
        // process: the H200's ran it 19 s after the fault.
        if (app.recovery.restarted && app.recovery.waiting)
          app.stale +=
              "; the first frame since the GPU fault, which the driver may hold back "
              "for a while (19 s on an H200)";
      }
      return;
    }
  }
  if (app.job.valid()) {
    FrameResult r = app.job.get();
    app.stale.clear();
    // A ladder or an A/B compare ends with its job, even one that failed (a GPU fault too).
    if (r.pinned) app.ui.ab.a = std::move(r.pinned), app.ui.ab.result.reset();
    if (app.ui.ab.running) {
      app.ui.ab.running = false;
      app.ui.ab.error = r.ab || !r.ab_error.empty() ? r.ab_error : r.error;
      if (r.ab) app.ui.ab.result = r.ab, app.ui.ab.why = r.ab_why, app.ui.ab.heat_of = nullptr;
    }
    if (app.ui.ladder.running) {  // a job with a ladder ended: its result, or why none
      app.ui.ladder.running = false;
      app.ui.ladder.error = r.ladder_error.empty() && !r.ladder_ran ? r.error : r.ladder_error;
      if (r.ladder) {
        app.ui.ladder.result = r.ladder, app.ui.ladder.ceilings = r.ceilings;
        app.ui.ladder.why = r.ladder_why, app.ui.ladder.why_step = 0;
      }
    }
    if (!r.error.empty()) app.ui.message = r.error;
    if (!r.host_fault.empty()) {
      recover_host_fault(app, r.host_fault);
      return;
    }
    if (r.gpu_lost) {
      recover_gpu(app, r.error);
      return;
    }
    if (r.compared) app.ui.diff = std::move(r.diff);
    if (r.ran || r.compared) ++app.result_gen;
    if (r.ran) {
      // A new input shape can change the kernels (letterbox's channel count): old histories
      // would mix with new ones.
      if (!app.view.slots.empty() && !r.slots.empty() && r.slots[0].desc != app.view.slots[0].desc)
        app.ui.launch_us.clear();
      // A new timing regime (cold or warm L2) starts new histories: medians never mix them.
      if (r.cold_l2 != app.view.cold_l2) app.ui.launch_us.clear(), app.ui.pipeline_ms.clear();
      for (const LaunchRecord& l : r.launches)
        if (std::isfinite(l.ms))  // NaN inside a graph: timed as a whole
          push_history(app.ui.launch_us[r.stage_names[l.stage] + "/" + l.kernel], 1e3f * l.ms);
      // The frame as bench's "frame" row times it: first launch's start to last launch's end
      // (or the graph between its event pair).
      if (app.ui.pipeline_ms.empty()) app.ui.timings_start = r.state_start;  // a new history
      app.ui.timings_end = r.state_end;
      push_history(app.ui.pipeline_ms, float(r.frame_ms));
      if (r.lab)  // the playground's step table
        push_history(app.ui.lab_ms[r.lab_variant][r.lab_config], float(r.frame_ms));
      push_history(app.ui.enqueue_ms, float(r.enqueue_ms));
      if (r.uploaded) {
        push_history(app.ui.upload_dma_ms, float(r.upload_dma_ms));
        push_history(app.ui.staging_ms, float(r.staging_ms));
      }
      if (r.counted) {
        app.ui.counters = r.counters;
        app.ui.counter_stages = r.stage_names;
      }
      ++app.frames;
      const bool first_after_fault = app.recovery.waiting;
      if (app.recovery.waiting) {
        app.recovery.waiting = false;
        app.recovery.live_ms =
            std::chrono::duration<double, std::milli>(Clock::now() - app.recovery.fault_at).count();
        recovery_trace(app, "the first frame ran");
      }
      display_result(app, r);
      if (first_after_fault) recovery_trace(app, "the first frame shown (CUDA-GL interop)");
      live_frame_ran(app, r);
      if (r.uploaded)  // the frames that sent one: the copy and the staging together
        push_history(app.ui.upload_ms, float(r.upload_dma_ms + r.staging_ms));
      push_history(app.ui.job_ms, float(r.job_ms));
      if (r.sweep_stage >= 0) app.ui.sweep_stage = r.sweep_stage, app.ui.sweep = r.sweep;
      app.view = std::move(r);  // a job that failed leaves the last good frame on screen
    }
  }
  if (app.job.valid() || app.gpu_lost || app.quit) return;
  if (app.live.submission) return;  // an exercise is being timed: the GPU is its alone
  JobInput in;
  in.sampler = app.sampler.get();
  const Op* lab = playground_of(app.ui.pipeline);
  io::Frame f;
  // A playground computes on its generated inputs: camera frames are left in the mailbox.
  if (!lab && app.capture->take_latest(f)) {
    push_history(app.ui.read_ms, float(f.read_ms));
    // A still image hands out the same frame: once it is on the GPU it is not sent again,
    // unless the user times the upload or the pipeline is configured anew.
    const bool on_gpu = f.image == app.last_input && !app.ui.resend_input &&
                        !app.ui.pipeline_dirty && !app.ui.graph_dirty && !app.view.slots.empty() &&
                        !app.view.lab;
    if (!on_gpu) in.shared_frame = std::move(f.image);
  } else if (!lab && app.resend) {  // after a GPU reset: the frame the old runner had
    in.shared_frame = std::make_shared<const HostImage>(std::move(*app.resend));
  }
  app.resend.reset();
  if (in.shared_frame) app.last_input = in.shared_frame;
  app.frame_has_input = in.shared_frame != nullptr;
  if (lab && (app.ui.lab_dirty || app.ui.pipeline_dirty)) {
    // New inputs only for a new playground or a new size or seed; a variant, block or math
    // change reconfigures on the inputs already on the device.
    if (app.ui.lab_dirty || app.ui.lab_loaded != lab->def.name) {
      in.lab = LabRequest{app.ui.lab_size, uint64_t(app.ui.lab_seed)};
      app.ui.lab_loaded = lab->def.name;
    }
    in.pipeline = app.ui.pipeline;
    app.ui.lab_dirty = app.ui.pipeline_dirty = false;
    app.ui.launch_us.clear();
    app.ui.diff.clear();
  }
  if (!lab) app.ui.lab_loaded.clear();
  // An image pipeline can only be configured for an input: it waits for the first frame (and,
  // after a playground, for a camera frame: the runner's input is then the playground's).
  const bool was_lab = !app.view.slots.empty() && app.view.lab;
  if (!lab && app.ui.pipeline_dirty && (in.shared_frame || (!app.view.slots.empty() && !was_lab))) {
    in.pipeline = app.ui.pipeline;
    app.ui.pipeline_dirty = false;
    app.ui.launch_us.clear();
    app.ui.diff.clear();
  }
  if (!app.view.slots.empty())
    in.shown_name =
        app.view.slots[size_t(std::min(app.ui.slot, int(app.view.slots.size()) - 1))].name;
  if (app.ui.graph_dirty) {
    in.graph = app.ui.graph;
    app.ui.graph_dirty = false;
  }
  if (app.interop.available()) in.staging = &app.staging;
  if (app.recovery.waiting && app.opt.hooks.trace_recovery) in.trace_since = app.recovery.fault_at;
  if (app.ui.ladder.requested && !app.view.slots.empty() && !in.pipeline &&
      size_t(app.ui.ladder.stage) < app.view.stage_names.size()) {
    LadderUi& L = app.ui.ladder;
    if (L.counters && app.opt.backend == Backend::Cuda) {
      if (!app.counters) app.counters = std::make_unique<CounterCollector>();
      in.ladder = LadderRequest{size_t(L.stage), L.spec, app.counters.get(), L.progress};
    } else {
      in.ladder = LadderRequest{size_t(L.stage), L.spec, nullptr, L.progress};
    }
    L.progress->done = 0, L.progress->total = 0, L.progress->stop = false;
    L.progress->last_step_ns = Clock::now().time_since_epoch().count();
    L.requested = false, L.running = true;
    L.error.clear();
  }
  if (!app.view.slots.empty() && !in.pipeline &&
      size_t(app.ui.ab.stage) < app.view.stage_names.size()) {
    AbUi& ab = app.ui.ab;
    if (ab.pin_requested) in.pin_stage = ab.stage, ab.pin_requested = false;
    if (ab.compare_requested && ab.a) {
      CounterCollector* c = nullptr;
      if (ab.counters && app.opt.backend == Backend::Cuda) {
        if (!app.counters) app.counters = std::make_unique<CounterCollector>();
        c = app.counters.get();
      }
      in.ab = AbRequest{size_t(ab.stage), *ab.a, c, ab.progress};
      ab.progress->last_step_ns = Clock::now().time_since_epoch().count();
      ab.compare_requested = false, ab.running = true;
      ab.error.clear();
    }
  }
  in.sweep_stage = app.ui.sweep_requested;
  app.ui.sweep_requested = -1;
  in.probe_x = app.ui.probe_x, in.probe_y = app.ui.probe_y;
  const bool every = app.ui.compare_every > 0 && app.frames > 0 &&
                     app.frames % uint64_t(app.ui.compare_every) == 0;
  in.compare = app.opt.backend == Backend::Cuda && (app.ui.compare_requested || every);
  app.ui.compare_requested = false;
  in.measure = app.opt.measure;
  in.measure.cold_l2 = app.ui.cold_l2;
  if (app.ui.counters_requested) {
    if (!app.counters) app.counters = std::make_unique<CounterCollector>();
    in.counters = app.counters.get();
  }
  app.ui.counters_requested = false;
  ++app.job_number;
  const GuiHooks& h = app.opt.hooks;
  in.simulate_fault = h.simulate_fault_at > 0 && app.job_number == h.simulate_fault_at;
  in.simulate_hang = h.simulate_hang_at > 0 && app.job_number == h.simulate_hang_at;
  in.simulate_host_fault =
      h.simulate_host_fault_at > 0 && app.job_number == h.simulate_host_fault_at;
  // The kernel host gets the pipeline's live kernel (or loses it) before the frame that runs it.
  if (app.host) {
    in.host = app.host.get();
    std::shared_ptr<const LiveKernel> want;
    std::string stage;
    for (const StageConfig& s : app.ui.pipeline.stages)
      if (s.custom)
        for (const VariantDef& v : s.custom->def.variants)
          if (v.live) want = v.live, stage = s.op;
    if (want != app.host_kernel) {
      in.install = want, in.install_stage = stage, in.uninstall = !want;
      app.host_kernel = want;
    }
  }
  app.job_started = Clock::now();
  app.job = std::async(std::launch::async, run_job, std::ref(*app.runner), std::move(in));
  if (wait) app.job.wait_for(std::chrono::milliseconds(int64_t(1e3 * app.opt.hang_report_s)));
}

namespace {

// While a long job runs, each counter replay pass is a sign of life: one step's counters replay
// its kernels tens of times, which can take longer than the hang limit.
class PassTick {
 public:
  PassTick(CounterCollector* c, std::function<void()> tick) : m_c(c) {
    if (m_c) m_c->on_pass = std::move(tick);
  }
  ~PassTick() {
    if (m_c) m_c->on_pass = nullptr;
  }
  PassTick(const PassTick&) = delete;
  PassTick& operator=(const PassTick&) = delete;

 private:
  CounterCollector* m_c;
};

}  // namespace

FrameResult run_job(Runner& r, JobInput in) {
  FrameResult out;
  const auto job_start = std::chrono::steady_clock::now();
  auto trace = [&](const char* step) {
    if (!in.trace_since) return;
    if (r.backend() == Backend::Cuda) LAB_CUDA_CHECK(cudaStreamSynchronize(r.stream()));
    const std::chrono::duration<double, std::milli> ms =
        std::chrono::steady_clock::now() - *in.trace_since;
    std::fprintf(stderr, "kernel-lab: recovery: first frame: %s (%.0f ms after the fault)\n", step,
                 ms.count());
  };
  const HostImage* frame = in.shared_frame ? in.shared_frame.get()
                           : in.frame      ? &*in.frame
                                           : nullptr;
  try {
    while (in.simulate_hang) std::this_thread::sleep_for(std::chrono::seconds(1));
    if (in.simulate_fault)
      throw CudaError(700, true, "an illegal memory access was encountered (simulated for a test)");
    if (in.simulate_host_fault)
      throw KernelHostFault("blur", 5, TrialOutcome::Faulted,
                            "faulted: an illegal memory access was encountered (simulated for a "
                            "test)");
    if (in.host && in.install) {
      TrialLimits limits;
      limits.timeout_s = 10;  // a module load, not a kernel
      const TrialReport rep = in.host->install(in.install->build(), limits);
      if (!rep.passed())
        throw KernelHostFault(in.install_stage, 0, rep.outcome,
                              std::string("could not be installed in the kernel host: ") +
                                  trial_outcome_name(rep.outcome) + ": " + rep.message);
    } else if (in.host && in.uninstall) {
      in.host->uninstall();
    }
    const auto slots = r.slots();
    const PipelineConfig* want = in.pipeline ? &*in.pipeline : nullptr;
    if (in.lab && want) {
      // A playground: its inputs generated here, on the worker, from the size and seed.
      const Op* op = playground_of(*want);
      if (!op) throw Error(ErrorKind::Internal, "a playground request for an image pipeline");
      r.configure_lab(*want, make_lab_inputs(*op, in.lab->size, in.lab->seed));
    } else if ((want && (frame || !slots.empty())) ||
               (frame && (slots.empty() || frame->desc() != slots[0].desc))) {
      // A new pipeline, a first frame, or a frame of another size: (re)configure.
      const ImageDesc input = frame ? frame->desc() : slots.at(0).desc;
      trace("job started");
      r.configure(want ? *want : r.pipeline(), input);
      trace("configured (buffers allocated)");
    }
    if (in.graph) r.set_graph(*in.graph);
    if (r.slots().empty()) return out;  // no frame yet
    if (frame) r.set_input(*frame), trace("input uploaded");
    // bench's figures are L2-warm: each timed run follows another run of the same frame. Between
    // two UI frames the GPU draws the UI and uploads textures, which evicts the frame from the
    // L2 (letterbox, the first kernel, read 1.1 us more at 1080p on the H200), so an untimed run
    // of this frame goes first, unless the user asked for DRAM-cold figures.
    if (!in.measure.cold_l2 && r.backend() == Backend::Cuda) r.run(), trace("untimed run");
    // A compared frame poisons a live kernel's outputs first, as check does: a pixel the kernel
    // leaves unwritten is then an error (NaN, magenta), not whatever the slot held before.
    if (in.compare && r.backend() == Backend::Cuda)
      for (size_t i = 0; i < r.stages().size(); ++i)
        if (r.stages()[i].custom && !r.skipped(i)) r.poison_outputs(i);
    // Timed exactly as bench times a frame (measure.h): behind the queue-ahead delay, so that
    // each launch's event pair holds the kernel alone, not the host's launch latency.
    if (in.sampler) out.state_start = in.sampler->current();
    timed_run(r, in.measure);
    if (in.sampler) out.state_end = in.sampler->current();
    trace("timed run");
    out.enqueue_ms = r.enqueue_ms();
    out.cold_l2 = in.measure.cold_l2;
    if (frame) {
      out.upload_dma_ms = r.upload_ms(), out.staging_ms = r.staging_ms();
      out.uploaded = true;
    }
    if (in.counters) {  // after the timed run, never inside it
      out.counters = collect_counters(r, *in.counters);
      out.counted = true;
    }
    out.ran = true;
    out.lab = playground_of(r.pipeline()) != nullptr;
    if (out.lab) {
      const ResolvedStage& st = r.stages()[0];
      out.lab_variant = st.variant_def().name;
      out.lab_config = st.block.str() + " " + math_name(st.math);
    }
    out.frame_ms = r.frame_ms();
    out.graph = r.graph();
    out.graph_split = r.graph_split();
    out.slots = r.slots();
    for (size_t i = 0; i < r.stages().size(); ++i) {
      out.stage_names.push_back(r.stages()[i].op->def.name);
      out.stage_bytes.push_back(r.stage_bytes(i));
    }
    out.stage_ms = r.stage_ms();
    out.launches = r.launches();
    // First shown: letterbox in the image pipeline, the result in a playground.
    out.shown_name = !in.shown_name.empty() ? in.shown_name
                     : out.lab              ? out.slots.back().name
                               : out.slots.at(std::min<size_t>(1, out.slots.size() - 1)).name;
    bool known = false;
    for (const SlotInfo& s : out.slots) {
      known = known || s.name == out.shown_name;
      if (s.name == slots::kNms) out.keypoint_space = s.desc;
      if (s.name == slots::kKeypoints) out.keypoints_k = s.desc.width;
    }
    if (!known) out.shown_name = out.lab ? out.slots.back().name : out.slots[0].name;
    const ImageRef src = display_view(r.slot_ref(out.shown_name));
    out.shown_desc = src.desc;
    const bool plane = src.desc.type != PixelType::U8 && src.desc.channels == 1;  // f32, u32
    const bool device = in.staging && r.backend() == Backend::Cuda;
    if (device && plane) {
      // Device to device into the staging copy; 8 bytes of range and 4 of probe come back.
      Staging& st = *in.staging;
      const ImageDesc shown{src.desc.width, src.desc.height, 1, PixelType::F32};
      if (st.shown.desc() != shown) st.shown = DeviceImage(shown);
      if (!st.range.data()) st.range = DeviceBuffer(4 * sizeof(unsigned));
      if (src.desc.type == PixelType::U32)  // widened on the device for the float texture
        device_u32_to_f32(src, st.shown.ref(), r.stream());
      else
        LAB_CUDA_CHECK(cudaMemcpy2DAsync(st.shown.data(), st.shown.pitch(), src.data, src.pitch,
                                         src.desc.row_bytes(), size_t(src.desc.height),
                                         cudaMemcpyDeviceToDevice, r.stream()));
      out.shown_range =
          device_min_max(st.shown.ref(), 0, r.stream(), static_cast<unsigned*>(st.range.data()));
      out.shown_on_device = true;
      if (in.probe_x >= 0 && in.probe_y >= 0 && in.probe_x < src.desc.width &&
          in.probe_y < src.desc.height) {
        LAB_CUDA_CHECK(cudaMemcpy(&out.probe_value,
                                  static_cast<const char*>(st.shown.data()) +
                                      size_t(in.probe_y) * st.shown.pitch() +
                                      size_t(in.probe_x) * sizeof(float),
                                  sizeof(float), cudaMemcpyDeviceToHost));
        out.probe_x = in.probe_x, out.probe_y = in.probe_y;
      }
    } else {
      out.shown = r.read_slot(out.shown_name);
      const Range rg = auto_range(display_view(out.shown.ref()));
      out.shown_range = {rg.lo, rg.hi};
    }
    if (out.keypoints_k > 0) {
      const ImageRef kp = r.slot_ref(slots::kKeypoints);
      if (out.shown_on_device) {  // written together with the texture (one map / unmap)
        Staging& st = *in.staging;
        if (st.keypoints.desc() != kp.desc) st.keypoints = DeviceImage(kp.desc);
        LAB_CUDA_CHECK(cudaMemcpyAsync(st.keypoints.data(), kp.data, kp.desc.row_bytes(),
                                       cudaMemcpyDeviceToDevice, r.stream()));
        out.keypoint_max = device_min_max(st.keypoints.ref(), 2, r.stream(),
                                          static_cast<unsigned*>(st.range.data()) + 2)
                               .hi;
        out.keypoints_on_device = true;
      } else {
        out.keypoints = r.read_slot(slots::kKeypoints);
        const auto v = out.keypoints.view<float>();
        for (int i = 0; i < v.width; ++i)
          out.keypoint_max = std::max(out.keypoint_max, v.at(i, 0, 2));
      }
    }
    if (in.sweep_stage >= 0 && size_t(in.sweep_stage) < r.stages().size() &&
        r.backend() == Backend::Cuda && !r.skipped(size_t(in.sweep_stage))) {
      const size_t i = size_t(in.sweep_stage);
      const ResolvedStage base = r.stages()[i];
      for (const Block& b : base.variant_def().blocks) {
        if (!block_refusal(base.variant_def(), b, &device_info()).empty()) continue;
        ResolvedStage cfg = base;
        cfg.block = b;
        try {
          MeasureOptions m = in.measure;
          m.warmup = 3, m.reps = 15;  // a sweep of many shapes inside one UI frame
          const Measurement meas = measure_stage(r, i, cfg, m);
          SweepPoint pt{b, meas.total.median_us, 0};
          if (!meas.launches.empty() && meas.launches[0].rec.func)
            pt.occupancy = meas.launches[0].rec.est.occupancy;
          out.sweep.push_back(pt);
        } catch (const Error& e) {
          if (e.kind() != ErrorKind::Refused) throw;  // refused at launch: not a point
        }
      }
      out.sweep_stage = in.sweep_stage;
      r.run_stage(i);  // the configured block's output again
    }
    if (in.pin_stage >= 0 && size_t(in.pin_stage) < r.stages().size())
      out.pinned = r.stages()[size_t(in.pin_stage)];
    if (in.ab) {
      try {
        if (in.ab->stage >= r.stages().size() || r.skipped(in.ab->stage))
          throw Error(ErrorKind::Usage, "A/B: the stage does not run in this pipeline");
        JobProgress* p = in.ab->progress.get();
        auto tick = [p] {
          if (p) p->last_step_ns = std::chrono::steady_clock::now().time_since_epoch().count();
        };
        const PassTick passes(in.ab->counters, tick);
        out.ab = std::make_shared<AbCompare>(compare_ab(r, in.ab->stage, in.ab->a,
                                                        r.stages()[in.ab->stage], in.measure,
                                                        in.ab->counters, tick));
        // explain's words (its SASS mix reads this executable once per kernel, then caches);
        // the CPU references have nothing to explain.
        if (r.backend() == Backend::Cuda) {
          const StepFacts fa = step_facts(out.ab->a.step, true);
          tick();
          out.ab_why = std::make_shared<Explanation>(explain(fa, step_facts(out.ab->b.step, true)));
          tick();
        }
      } catch (const CudaError&) {
        throw;
      } catch (const KernelHostFault&) {
        throw;  // the frame's own handler takes the kernel out
      } catch (const Error& e) {
        out.ab_error = e.what();
      }
    }
    if (in.ladder) {
      out.ladder_ran = true;
      JobProgress& p = *in.ladder->progress;
      try {
        auto tick = [&p] {
          p.last_step_ns = std::chrono::steady_clock::now().time_since_epoch().count();
        };
        auto progress = [&p, &tick](size_t done, size_t total) {
          p.done = done, p.total = total;
          tick();
          return !p.stop.load();
        };
        CounterCollector* c = in.ladder->counters;
        const PassTick passes(c, tick);
        auto l = std::make_shared<Ladder>(
            run_ladder(r, in.ladder->stage, in.ladder->spec, in.measure, c, progress));
        // The roofline's compute ceiling, in the same run (tens of milliseconds).
        if (r.backend() == Backend::Cuda) out.ceilings = measured_ceilings(l->copy_gbs);
        if (r.backend() == Backend::Cuda) {  // each step against the one before
          std::vector<StepFacts> facts;      // cuobjdump per kernel: a sign of life after each
          for (const LadderStep& st : l->steps) {
            facts.push_back(step_facts(st, true));
            tick();
          }
          out.ladder_why = std::make_shared<const std::vector<Explanation>>(explain_steps(facts));
        }
        out.ladder = std::move(l);
      } catch (const CudaError&) {
        throw;
      } catch (const KernelHostFault&) {
        throw;  // the frame's own handler takes the kernel out  // sticky or not, the frame's own
                // handler decides
      } catch (const Error& e) {
        out.ladder_error = e.what();  // the frame is fine: only the ladder failed
      }
    }
    if (in.compare) {
      for (size_t i = 0; i < r.stages().size(); ++i) {
        if (r.skipped(i)) continue;  // fused away or disabled: nothing of its own to diff
        if (!r.stages()[i].reference()) continue;  // a live kernel added as a stage
        StageDiff d;
        d.stage = r.stages()[i].op->def.name;
        StageCompare c = compare_stage(r, i);
        d.reference = std::move(c.reference);
        d.stats = c.diff;
        for (const auto& name : r.stages()[i].outputs()) d.output.push_back(r.read_slot(name));
        out.diff.push_back(std::move(d));
      }
      out.compared = true;
    }
    out.job_ms =
        std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - job_start)
            .count();
  } catch (const KernelHostFault& e) {
    out.host_fault = e.what();  // the child's fault: this process's context is fine
  } catch (const CudaError& e) {
    out.error = e.what();
    out.gpu_lost = e.sticky();
  } catch (const Error& e) {
    out.error = e.what();  // the previous configuration stays in the runner
  } catch (const std::exception& e) {
    out.error = std::string("internal error: ") + e.what();  // shown, and the UI goes on
  }
  return out;
}

bool wait_out_hung_frame(GuiApp& app) {
  if (app.stale.empty()) return false;
  if (!app.stale_drawn) {  // this frame draws the report
    app.stale_drawn = true;
    return false;
  }
  engine_frame(app, false);
  if (app.stale.empty()) app.stale_drawn = false;  // it ended: draw again
  std::this_thread::sleep_for(std::chrono::milliseconds(20));
  return true;
}

}  // namespace lab::ui

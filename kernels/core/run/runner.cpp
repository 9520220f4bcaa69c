#include "runner.h"

#include <nvtx3/nvToolsExt.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstring>

#include "delay.h"
#include "live.h"

namespace lab {

const char* backend_name(Backend b) {
  return b == Backend::Cuda ? "cuda" : "cpu";
}

// The LaunchContext a stage's launcher sees: the runner's stream, the stage's scratch memory,
// and the bracketing of every launch.
class Runner::Context : public LaunchContext {
 public:
  // `cfg`: the configuration that runs (a sweep's or a check's, not always the stage's own).
  Context(Runner& r, size_t stage, const ResolvedStage& cfg) : m_r(r), m_stage(stage), m_cfg(cfg) {}

  cudaStream_t stream() const override { return m_r.m_stream; }

  void* scratch(size_t bytes, int slot) override {
    auto& s = m_r.m_state[m_stage].scratch;
    if (s.size() <= size_t(slot)) s.resize(size_t(slot) + 1);
    if (s[slot].size() < bytes) s[slot] = DeviceBuffer(bytes);
    return s[slot].data();
  }

  void* persistent(size_t bytes, uint64_t key, const std::function<void(void*)>& fill) override {
    StageState& st = m_r.m_state[m_stage];
    if (st.persistent_valid && st.persistent_key == key && st.persistent.size() >= bytes)
      return st.persistent.data();
    st.persistent_valid = false;
    if (st.persistent.size() < bytes) st.persistent = DeviceBuffer(bytes);
    fill(st.persistent.data());
    st.persistent_key = key;
    st.persistent_valid = true;
    return st.persistent.data();
  }

  void before_launch(const void* func, const char* name, dim3 grid, dim3 block,
                     size_t smem) override {
    m_r.m_rec.refuse_if_unlaunchable(func, name, grid, block, smem);
    if (m_r.m_flush_each) m_r.enqueue_l2_flush();  // outside the launch's event pair and range
    m_r.m_rec.begin(m_r.m_stream, m_stage, m_cfg.label(), func, name, grid, block, smem);
    m_r.m_rec.launches().back().runs = m_runs;
  }

  void after_launch() override { m_r.m_rec.end(m_r.m_stream); }

  // A fallback that falls back in turn says so again: the last word names the code that runs.
  void runs_step(const std::string& variant, const std::string& where) override {
    m_runs = variant + ": " + where;
  }

  // A launcher that throws between before_launch and after_launch leaves no range open.
  ~Context() override { m_r.m_rec.close_range(); }

 private:
  Runner& m_r;
  size_t m_stage;
  const ResolvedStage& m_cfg;
  std::string m_runs;
};

namespace {

// `s`'s parameters, and those of the stages of `stages` that its variant fuses as "stage.name".
ParamMap with_fused_params(const std::vector<ResolvedStage>& stages, const ResolvedStage& s) {
  ParamMap p = s.params;
  for (const std::string& fused : s.variant_def().fuses)
    for (const ResolvedStage& st : stages)
      if (st.op->def.name == fused)
        for (const auto& [name, value] : st.params) p[fused + "." + name] = value;
  return p;
}

// The stage's NVTX ranges, nested as the lab names a configuration: stage / variant / block /
// math, so that ncu's --nvtx-include "stage/variant/block/math/" selects exactly its kernels.
struct StageRanges {
  explicit StageRanges(const ResolvedStage& s) {
    nvtxRangePushA(s.op->def.name.c_str());
    nvtxRangePushA(s.variant_def().name.c_str());
    nvtxRangePushA(s.block.str().c_str());
    nvtxRangePushA(math_name(s.math));
  }
  ~StageRanges() {
    for (int k = 0; k < 4; ++k) nvtxRangePop();
  }
  StageRanges(const StageRanges&) = delete;
  StageRanges& operator=(const StageRanges&) = delete;
};
}  // namespace

Runner::Runner(Backend backend) : m_backend(backend) {
  if (backend == Backend::Cuda) {
    const DeviceInfo& d = device_info();
    if (!d.present)
      throw Error(ErrorKind::Unavailable,
                  "no usable CUDA device (" + d.why_absent + "); run with --device cpu");
    LAB_CUDA_CHECK(cudaStreamCreateWithFlags(&m_stream, cudaStreamNonBlocking));
    m_up = std::make_unique<Uploader>(m_stream);
  }
}

Runner::~Runner() {
  reset_graph();
  if (m_stream) cudaStreamSynchronize(m_stream);
  m_up.reset();  // its copies done, its staging freed
  for (cudaEvent_t e : m_graph_ev)
    if (e) cudaEventDestroy(e);
  if (m_stream) cudaStreamDestroy(m_stream);
}

void Runner::configure_lab(const PipelineConfig& pipeline, const LabInputs& in) {
  if (!playground_of(pipeline) || in.slots.empty())
    throw Error(ErrorKind::Internal, "configure_lab: not a playground with inputs");
  for (const auto& name : m_lab_extra) m_extra.erase(name);
  m_lab_extra.clear();
  for (size_t k = 1; k < in.slots.size(); ++k) {
    set_extra_slot(in.slots[k].first, in.slots[k].second.desc());
    m_lab_extra.push_back(in.slots[k].first);
  }
  configure(pipeline, in.slots[0].second.desc());
  // Generated once, not streamed: a plain upload into device memory, whatever the upload mode.
  Slot& input = m_slots.at("input");
  input.mapped = ImageRef{};
  if (m_backend == Backend::Cuda) {
    m_up->wait_copies();
    upload(in.slots[0].second, input.dev, m_stream);
  } else {
    input.host = in.slots[0].second;
  }
  for (size_t k = 1; k < in.slots.size(); ++k) write_slot(in.slots[k].first, in.slots[k].second);
  reset_graph();
}

void Runner::configure(const PipelineConfig& pipeline, const ImageDesc& input) {
  if (input.empty()) throw Error(ErrorKind::Data, "the input image is empty");
  if (!playground_of(pipeline)) {  // an image pipeline: a playground's slots are dropped
    for (const auto& name : m_lab_extra) m_extra.erase(name);
    m_lab_extra.clear();
  }
  std::vector<ResolvedStage> stages =
      resolve(pipeline, m_backend == Backend::Cuda ? &device_info() : nullptr);
  // Shapes first, so that a bad input leaves the runner as it was.
  std::map<std::string, ImageDesc> descs{{"input", input}};
  std::vector<std::string> order{"input"};
  for (const auto& [name, desc] : m_extra) descs[name] = desc, order.push_back(name);
  std::vector<bool> skip(stages.size(), false);
  for (size_t i = 0; i < stages.size(); ++i) {
    const ResolvedStage& s = stages[i];
    if (!s.enabled) skip[i] = true;
    // A fused variant does the work of the nearest earlier stage of each op it names.
    if (s.enabled)
      for (const std::string& fused : s.variant_def().fuses)
        for (size_t j = i; j-- > 0;)
          if (stages[j].op->def.name == fused) {
            skip[j] = true;
            break;
          }
    std::vector<ImageDesc> in;
    for (const std::string& spec : s.inputs()) {
      auto it = descs.find(slot_name(spec));
      if (it == descs.end()) {
        if (optional_slot(spec)) {
          in.push_back(ImageDesc{0, 0, 1, PixelType::F32});
          continue;
        }
        throw Error(ErrorKind::Usage, "stage " + s.op->def.name + " reads slot '" + spec +
                                          "', which no earlier stage writes");
      }
      in.push_back(it->second);
    }
    // A fused variant's outputs may take their size from a stage it does the work of (its shape
    // sees the skipped stages' parameters).
    const std::vector<ImageDesc> out = s.shape()(in, with_fused_params(stages, s));
    const std::vector<std::string>& names = s.outputs();
    if (out.size() != names.size())
      throw Error(ErrorKind::Internal, "stage " + s.op->def.name + ": shape() count mismatch");
    for (size_t k = 0; k < out.size(); ++k) {
      if (!descs.count(names[k])) order.push_back(names[k]);
      descs[names[k]] = out[k];
    }
  }
  for (const auto& [name, desc] : descs) {
    Slot& slot = m_slots[name];
    if (slot.desc == desc && (slot.dev.data() || slot.host.bytes())) continue;
    if (name == "input") {  // the upload buffers follow the input's shape
      if (m_stream) LAB_CUDA_CHECK(cudaStreamSynchronize(m_stream));
      if (m_up) m_up->release();
      m_input_spare = DeviceImage();
      slot.mapped = ImageRef{};
    }
    slot.desc = desc;
    slot.dev = DeviceImage();
    slot.host = HostImage();
    if (m_backend == Backend::Cuda)
      slot.dev = DeviceImage(desc);
    else
      slot.host = HostImage(desc);
  }
  for (auto it = m_slots.begin(); it != m_slots.end();)
    it = descs.count(it->first) ? std::next(it) : m_slots.erase(it);
  m_slot_order = order;
  m_pipeline = pipeline;
  m_stages = std::move(stages);
  m_skip = std::move(skip);
  reset_graph();
  m_state.resize(m_stages.size());
  m_stage_ms.assign(m_stages.size(), 0.0);
}

std::vector<SlotInfo> Runner::slots() const {
  std::vector<SlotInfo> out;
  for (const auto& name : m_slot_order) out.push_back({name, m_slots.at(name).desc});
  return out;
}

void Runner::set_extra_slot(const std::string& name, const ImageDesc& desc) {
  if (desc.empty())
    m_extra.erase(name);
  else
    m_extra[name] = desc;
}

std::string Runner::fused_into(size_t i) const {
  if (!m_skip.at(i) || !m_stages.at(i).enabled) return "";
  for (size_t k = i + 1; k < m_stages.size(); ++k) {
    const auto& fuses = m_stages[k].variant_def().fuses;
    // A stage skipped itself fuses nothing (detect skips nms, whose v5 would fuse blur).
    if (m_stages[k].enabled && !m_skip[k] &&
        std::find(fuses.begin(), fuses.end(), m_stages[i].op->def.name) != fuses.end())
      return m_stages[k].op->def.name + "/" + m_stages[k].variant_def().name;
  }
  return "";
}

ParamMap Runner::params_for(const ResolvedStage& s) const {
  return with_fused_params(m_stages, s);
}

void Runner::set_graph(bool on) {
  if (on && m_backend != Backend::Cuda)
    throw Error(ErrorKind::Usage, "CUDA graphs need the cuda backend");
  if (on != m_use_graph) reset_graph();
  m_use_graph = on;
}

void Runner::reset_graph() {
  if (m_graph_exec) cudaGraphExecDestroy(m_graph_exec);
  if (m_graph) cudaGraphDestroy(m_graph);
  m_graph_exec = nullptr;
  m_graph = nullptr;
  m_graph_launches.clear();
  for (Piece& p : m_split)
    if (p.exec) cudaGraphExecDestroy(p.exec);
  m_split.clear();
}

void Runner::set_remote(RemoteLaunches* r) {
  if (r != m_remote) reset_graph();
  m_remote = r;
}

void Runner::set_upload_mode(UploadMode m) {
  if (!m_up || m == m_up->mode()) return;
  m_up->set_mode(m);
  auto it = m_slots.find("input");
  if (it != m_slots.end()) it->second.mapped = ImageRef{};
  reset_graph();  // a graph captured the input's address
}

void Runner::set_input(const HostImage& img) {
  auto it = m_slots.find("input");
  if (it == m_slots.end()) throw Error(ErrorKind::Usage, "no slot named 'input'");
  Slot& s = it->second;
  if (img.desc() != s.desc)
    throw Error(ErrorKind::Internal, "input is " + s.desc.str() + ", given " + img.desc().str());
  if (m_backend == Backend::Cpu) {
    s.host = img;
    return;
  }
  if (m_up->mode() == UploadMode::Mapped) {
    // The kernels read this memory in place: the previous frame must be done with it.
    LAB_CUDA_CHECK(cudaStreamSynchronize(m_stream));
    // In place while the frame stays where it is: a captured graph holds one address.
    const ImageRef ref = m_up->map(img, !m_use_graph || s.mapped.data == img.bytes());
    if (s.mapped.data != ref.data) reset_graph();  // a captured graph holds the old address
    s.mapped = ref;
    return;
  }
  m_up->send(img, s.dev);
}

void Runner::run_overlapped(const HostImage& next) {
  if (m_backend != Backend::Cuda || m_up->mode() != UploadMode::Pinned || m_use_graph) {
    run();
    set_input(next);
    return;
  }
  Slot& in = m_slots.at("input");
  if (next.desc() != in.desc)
    throw Error(ErrorKind::Internal, "input is " + in.desc.str() + ", given " + next.desc().str());
  if (m_input_spare.desc() != in.desc) m_input_spare = DeviceImage(in.desc);
  // This frame waits for its own copy (sent by the last call). The next frame's copy is queued
  // before this frame's kernels, so that it runs under them whatever the host does while it
  // enqueues them; the spare buffer is free (the last frame that read it has been collected).
  // Nothing waits for that copy here: it is still running when this frame ends (the DMA of a
  // 1080p frame outlasts the pipeline), and the next call queues the copy after it before the
  // copy engine runs dry, so the copies run back to back.
  m_up->order_compute();
  m_up->send(next, m_input_spare, false);
  m_rec.clear();
  enqueue_all();  // this frame, on the current input
  collect();
  std::swap(in.dev, m_input_spare);  // the next run reads what is being sent
}

StageArgs Runner::args_for(const ResolvedStage& cfg) const {
  StageArgs a;
  for (const auto& spec : cfg.inputs()) {
    auto it = m_slots.find(slot_name(spec));
    a.in.push_back(it != m_slots.end() ? it->second.ref() : ImageRef{});
  }
  for (const auto& name : cfg.outputs()) a.out.push_back(m_slots.at(name).ref());
  a.params = params_for(cfg);
  a.block = cfg.block;
  return a;
}

void Runner::enqueue_stage(size_t i, const ResolvedStage* cfg) {
  const ResolvedStage& s = cfg ? *cfg : m_stages.at(i);
  if (s.op != m_stages.at(i).op)
    throw Error(ErrorKind::Internal,
                "run_stage: stage " + std::to_string(i) + " is not " + s.op->def.name);
  const StageArgs args = args_for(s);
  if (m_backend == Backend::Cpu) {
    if (!s.reference())
      throw Error(ErrorKind::Usage, "stage " + s.op->def.name + " runs only on a GPU");
    const auto t0 = std::chrono::steady_clock::now();
    s.reference()(args);
    m_stage_ms[i] =
        std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
    m_frame_ms = 0;
    for (double ms : m_stage_ms) m_frame_ms += ms;
    return;
  }
  const StageRanges ranges(s);
  Context ctx(*this, i, s);
  if (s.variant_def().live && m_remote)
    run_hosted(i, s, args);
  else if (const auto& live = s.variant_def().live)
    launch_live(ctx, args, *live, s.op->def.params);
  else
    s.op->launcher(s.variant, s.math)(ctx, args);
}

// An eager frame before a capture: scratch buffers and persistent tables are allocated and
// filled outside it, where allocation and synchronous copies are allowed.
void Runner::eager_frame() {
  m_use_graph = false;
  const bool per_launch = m_per_launch;
  m_per_launch = true;
  m_rec.clear();
  enqueue_all();
  collect();
  m_use_graph = true;
  m_per_launch = per_launch;
}

bool Runner::hosted(size_t i) const {
  return m_remote && m_stages[i].enabled && !m_skip[i] && m_stages[i].variant_def().live;
}

CounterValues Runner::remote_counters(size_t i, std::string* why) {
  if (!m_remote) throw Error(ErrorKind::Internal, "remote_counters: no kernel host");
  const ResolvedStage& s = m_stages.at(i);
  LAB_CUDA_CHECK(cudaStreamSynchronize(m_stream));
  return m_remote->counters(s.op->def.name, args_for(s), s.op->def.params, m_stream, why);
}

void Runner::run_hosted(size_t i, const ResolvedStage& s, const StageArgs& args) {
  const RemoteLaunch r = m_remote->launch(s.op->def.name, args, s.op->def.params, m_stream);
  m_rec.add_remote(i, "user_kernel", r.grid, r.block, r.ms, r.attrs, r.blocks_per_sm);
}

// The graph split at hosted stages: each run of in-process stages is its own graph, captured
// once after an eager frame (as the whole graph is); the hosted stage runs between them.
void Runner::enqueue_split() {
  if (m_split.empty()) {
    eager_frame();
    std::vector<Piece> pieces;
    for (size_t i = 0; i < m_stages.size();) {
      Piece p;
      p.first = i;
      if (hosted(i)) {
        p.end = ++i;
      } else {
        while (i < m_stages.size() && !hosted(i)) ++i;
        p.end = i;
      }
      pieces.push_back(std::move(p));
    }
    m_rec.set_untimed(true);
    try {
      for (Piece& p : pieces) {
        if (hosted(p.first)) continue;
        m_rec.clear();
        LAB_CUDA_CHECK(cudaStreamBeginCapture(m_stream, cudaStreamCaptureModeThreadLocal));
        cudaGraph_t g = nullptr;
        try {
          for (size_t j = p.first; j < p.end; ++j) {
            if (!m_stages[j].enabled)
              bypass(j);
            else if (!m_skip[j])
              enqueue_stage(j);
          }
        } catch (...) {
          cudaStreamEndCapture(m_stream, &g);
          if (g) cudaGraphDestroy(g);
          cudaGetLastError();
          throw;
        }
        LAB_CUDA_CHECK(cudaStreamEndCapture(m_stream, &g));
        const cudaError_t e = cudaGraphInstantiateWithFlags(&p.exec, g, 0);
        cudaGraphDestroy(g);
        LAB_CUDA_CHECK(e);
        p.launches = m_rec.launches();
      }
    } catch (...) {
      m_rec.set_untimed(false);
      for (Piece& p : pieces)
        if (p.exec) cudaGraphExecDestroy(p.exec);
      throw;
    }
    m_rec.set_untimed(false);
    m_split = std::move(pieces);
  }
  m_rec.clear();
  LAB_CUDA_CHECK(cudaEventRecord(m_graph_ev[0], m_stream));
  for (const Piece& p : m_split) {
    if (p.exec) {
      for (const LaunchRecord& r : p.launches) m_rec.launches().push_back(r);
      LAB_CUDA_CHECK(cudaGraphLaunch(p.exec, m_stream));
    } else {
      enqueue_stage(p.first);
    }
  }
  LAB_CUDA_CHECK(cudaEventRecord(m_graph_ev[1], m_stream));
  m_frame_pair = true;
}

void Runner::enqueue_all() {
  for (cudaEvent_t& e : m_graph_ev)
    if (!e) LAB_CUDA_CHECK(cudaEventCreate(&e));
  // Every stage in order: launched, skipped (a fused variant does its work) or bypassed.
  auto stages = [this] {
    for (size_t i = 0; i < m_stages.size(); ++i) {
      if (!m_stages[i].enabled)
        bypass(i);
      else if (!m_skip[i])
        enqueue_stage(i);
    }
  };
  if (!m_use_graph && m_per_launch) {
    stages();
    return;
  }
  if (!m_use_graph) {  // one event pair around the frame, none per launch
    LAB_CUDA_CHECK(cudaEventRecord(m_graph_ev[0], m_stream));
    m_rec.set_untimed(true);  // (the launches skip their own event records)
    try {
      stages();
    } catch (...) {
      m_rec.set_untimed(false);
      throw;
    }
    m_rec.set_untimed(false);
    LAB_CUDA_CHECK(cudaEventRecord(m_graph_ev[1], m_stream));
    m_frame_pair = true;
    return;
  }
  bool any_hosted = false;
  for (size_t i = 0; i < m_stages.size(); ++i) any_hosted = any_hosted || hosted(i);
  if (any_hosted) {
    enqueue_split();
    return;
  }
  if (!m_graph_exec) {
    eager_frame();
    m_rec.clear();
    m_rec.set_untimed(true);
    LAB_CUDA_CHECK(cudaStreamBeginCapture(m_stream, cudaStreamCaptureModeThreadLocal));
    try {
      stages();
    } catch (...) {
      cudaGraph_t g = nullptr;
      cudaStreamEndCapture(m_stream, &g);
      if (g) cudaGraphDestroy(g);
      cudaGetLastError();
      m_rec.set_untimed(false);
      throw;
    }
    m_rec.set_untimed(false);
    LAB_CUDA_CHECK(cudaStreamEndCapture(m_stream, &m_graph));
    LAB_CUDA_CHECK(cudaGraphInstantiateWithFlags(&m_graph_exec, m_graph, 0));
    m_graph_launches = m_rec.launches();
  }
  m_rec.launches() = m_graph_launches;
  LAB_CUDA_CHECK(cudaEventRecord(m_graph_ev[0], m_stream));
  LAB_CUDA_CHECK(cudaGraphLaunch(m_graph_exec, m_stream));
  LAB_CUDA_CHECK(cudaEventRecord(m_graph_ev[1], m_stream));
  m_frame_pair = true;
}

void Runner::collect() {
  if (m_backend == Backend::Cpu) return;
  LAB_CUDA_CHECK(cudaStreamSynchronize(m_stream));
  m_up->collect();
  if (m_frame_pair) {  // a graph, or a frame timed as a whole
    m_frame_pair = false;
    float ms = 0;
    LAB_CUDA_CHECK(cudaEventElapsedTime(&ms, m_graph_ev[0], m_graph_ev[1]));
    m_frame_ms = ms;
    std::fill(m_stage_ms.begin(), m_stage_ms.end(), std::nan(""));
    m_rec.collect(false);
    return;
  }
  m_frame_ms = m_rec.collect(true);
  std::fill(m_stage_ms.begin(), m_stage_ms.end(), 0.0);
  for (const LaunchRecord& r : m_rec.launches()) m_stage_ms[r.stage] += r.ms;
}

// A disabled stage's outputs: its first input passed through when the shapes match, else
// zeros; in stage order, as copies or memsets on the stream (captured into a graph too). The
// op's own slots, whatever the variant: a disabled fused variant skips no stage, so the slots
// it would have read or written besides its op's are the other stages' to fill.
void Runner::bypass(size_t i) {
  const ResolvedStage& s = m_stages.at(i);
  const auto& outs = s.op->def.outputs;
  const std::string in = s.op->def.inputs.empty() ? "" : slot_name(s.op->def.inputs[0]);
  for (size_t k = 0; k < outs.size(); ++k) {
    Slot& o = m_slots.at(outs[k]);
    const Slot* src =
        k == 0 && m_slots.count(in) && m_slots.at(in).desc == o.desc ? &m_slots.at(in) : nullptr;
    if (m_backend == Backend::Cpu) {
      if (src)
        o.host = src->host;
      else
        std::fill(o.host.bytes(), o.host.bytes() + o.desc.bytes(), uint8_t(0));
      continue;
    }
    if (src)
      LAB_CUDA_CHECK(cudaMemcpy2DAsync(o.dev.data(), o.dev.pitch(), src->dev.data(),
                                       src->dev.pitch(), o.desc.row_bytes(), size_t(o.desc.height),
                                       cudaMemcpyDeviceToDevice, m_stream));
    else
      poison(o.dev.ref(), true, m_stream, 0);
  }
}

void Runner::run() {
  m_rec.clear();
  if (m_backend == Backend::Cpu) {
    std::fill(m_stage_ms.begin(), m_stage_ms.end(), 0.0);
    for (size_t i = 0; i < m_stages.size(); ++i) {
      if (!m_stages[i].enabled) bypass(i);
      if (!m_skip[i]) enqueue_stage(i);
    }
    return;
  }
  m_up->order_compute();  // a frame run_overlapped() sent
  enqueue_all();
  collect();
}

void Runner::run_queued(double queue_ahead_us, size_t stage, const ResolvedStage* cfg,
                        bool flush_l2) {
  if (m_backend == Backend::Cpu) {  // the references: nothing to queue, flush or collect
    if (stage == SIZE_MAX)
      run();
    else
      run_stage(stage, cfg);
    m_enqueue_ms = 0;
    return;
  }
  m_rec.clear();
  m_up->order_compute();
  if (queue_ahead_us > 0) enqueue_delay(m_stream, queue_ahead_us);
  if (flush_l2) enqueue_l2_flush();
  const auto t0 = std::chrono::steady_clock::now();
  if (stage == SIZE_MAX) {
    enqueue_all();
  } else {
    enqueue_stage(stage, cfg);
  }
  m_enqueue_ms =
      std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
  collect();
}

void Runner::enqueue_l2_flush() {
  if (m_backend == Backend::Cuda) m_flush.enqueue(m_stream);
}

void Runner::run_stage(size_t i, const ResolvedStage* cfg) {
  m_rec.clear();
  if (m_up) m_up->order_compute();
  enqueue_stage(i, cfg);
  collect();
}

HostImage Runner::read_slot(const std::string& name) const {
  auto it = m_slots.find(name);
  if (it == m_slots.end()) throw Error(ErrorKind::Usage, "no slot named '" + name + "'");
  if (m_backend == Backend::Cuda) {
    if (name == "input") m_up->wait_copies();
    return download(it->second.ref(), m_stream);
  }
  return it->second.host;
}

ImageRef Runner::slot_ref(const std::string& name) const {
  auto it = m_slots.find(name);
  if (it == m_slots.end()) throw Error(ErrorKind::Usage, "no slot named '" + name + "'");
  return it->second.ref();
}

void Runner::write_slot(const std::string& name, const HostImage& img) {
  if (name == "input") return set_input(img);  // through the upload mode's buffers
  auto it = m_slots.find(name);
  if (it == m_slots.end()) throw Error(ErrorKind::Usage, "no slot named '" + name + "'");
  Slot& s = it->second;
  if (img.desc() != s.desc)
    throw Error(ErrorKind::Internal,
                "slot " + name + " is " + s.desc.str() + ", given " + img.desc().str());
  if (m_backend == Backend::Cuda)
    upload(img, s.dev, m_stream);
  else
    s.host = img;
}

void Runner::poison_outputs(size_t i, const ResolvedStage* cfg) {
  for (const auto& name : (cfg ? *cfg : m_stages.at(i)).outputs())
    poison(m_slots.at(name).ref(), m_backend == Backend::Cuda, m_stream);
  if (m_backend == Backend::Cuda) LAB_CUDA_CHECK(cudaStreamSynchronize(m_stream));
}

std::vector<HostImage> Runner::read_inputs(const ResolvedStage& s) const {
  std::vector<HostImage> in;
  for (const auto& spec : s.inputs())
    in.push_back(m_slots.count(slot_name(spec)) ? read_slot(slot_name(spec)) : HostImage());
  return in;
}

std::vector<HostImage> Runner::reference(size_t i, const ResolvedStage* cfg) const {
  const ResolvedStage& s = cfg ? *cfg : m_stages.at(i);
  std::vector<HostImage> in = read_inputs(s), out;
  for (const auto& name : s.outputs()) {
    out.emplace_back(m_slots.at(name).desc);
    poison(out.back().ref(), false);
  }
  StageArgs a;
  for (auto& img : in) a.in.push_back(img.ref());
  for (auto& img : out) a.out.push_back(img.ref());
  a.params = params_for(s);
  a.block = s.block;
  if (!s.reference())
    throw Error(ErrorKind::Usage, "stage " + s.op->def.name + " has no CPU reference");
  s.reference()(a);
  return out;
}

DiffStats Runner::compare(size_t i, const std::vector<HostImage>& ref, MathMode math,
                          const ResolvedStage* cfg) const {
  const ResolvedStage& s = cfg ? *cfg : m_stages.at(i);
  const std::vector<std::string>& outs = s.outputs();
  if (const CompareFn own = s.compare()) {
    const std::vector<HostImage> in = read_inputs(s);
    std::vector<HostImage> got;
    for (const auto& name : outs) got.push_back(read_slot(name));
    const ParamMap params = params_for(s);
    CompareArgs a{&in, &got, &ref, &outs, &s.variant_def(), s.op->tolerance(math), math, &params};
    return own(a);
  }
  DiffStats total;
  for (size_t k = 0; k < outs.size(); ++k) {
    const std::string& name = outs[k];
    merge_diff(total, diff_images(read_slot(name), ref.at(k), s.op->tolerance(math), name));
  }
  return total;
}

double Runner::stage_bytes(size_t i, const ResolvedStage* cfg) const {
  const ResolvedStage& s = cfg ? *cfg : m_stages.at(i);
  double bytes = 0;
  for (const auto& spec : s.inputs())
    if (m_slots.count(slot_name(spec))) bytes += double(m_slots.at(slot_name(spec)).desc.bytes());
  for (const auto& name : s.outputs()) bytes += double(m_slots.at(name).desc.bytes());
  return bytes;
}

}  // namespace lab

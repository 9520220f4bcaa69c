// The uploader: how input frames reach the GPU. It owns the page-locked staging buffer, the copy
// stream and the event pair that times each copy, and says what the last upload cost. The
// runner owns one (cuda backend) and hands it its compute stream.
#pragma once

#include <cuda_runtime_api.h>

#include <memory>
#include <optional>
#include <string>

#include "image.h"

namespace lab {

// How input frames reach the GPU.
//   pageable  cudaMemcpy from the caller's (pageable) memory: the driver stages it, the host waits.
//   pinned    the frame is copied into page-locked memory and sent with cudaMemcpyAsync on a copy
//             stream; the compute stream waits on an event, and run_overlapped() sends the next
//             frame while the current one computes (double-buffered input): up to two copies
//             in flight, so that the copy engine never waits for the host between frames.
//   mapped    zero-copy: the frame is written into mapped page-locked memory the kernels read
//             directly; no device copy (what an integrated GPU such as Orin wants: CPU and GPU
//             share the DRAM).
enum class UploadMode { Pageable, Pinned, Mapped };
const char* upload_mode_name(UploadMode m);
// "pageable" | "pinned" | "mapped"; nullopt otherwise.
std::optional<UploadMode> parse_upload_mode(const std::string& s);
// Mapped on an integrated GPU, pinned on a discrete one.
UploadMode default_upload_mode();

class Uploader {
 public:
  // `compute`: the stream the kernels run on (a pinned copy orders it; pageable copies run on it).
  explicit Uploader(cudaStream_t compute);
  ~Uploader();  // waits for the copy stream
  // One owner of the staging buffer and the copy stream.
  Uploader(const Uploader&) = delete;
  Uploader& operator=(const Uploader&) = delete;

  UploadMode mode() const { return m_mode; }
  // Waits for both streams and frees the staging buffer (its kind follows the mode).
  void set_mode(UploadMode m);
  // Waits for the copy stream and frees the staging buffer (the input's shape changed).
  void release();
  // The copy stream's work is done (before reading or rewriting what it writes).
  void wait_copies();

  // Sends `img` into `dst`. Pageable: synchronous. Pinned: asynchronous on the copy stream, and
  // the compute stream waits for its end unless `order_compute` is false (then order_compute()
  // does that later).
  void send(const HostImage& img, DeviceImage& dst, bool order_compute = true);
  // The compute stream waits for every copy sent so far.
  void order_compute();
  // Mapped: the view kernels read in place (the compute stream must be done with the previous
  // frame). A page-locked frame (HostImage::frame(): padded, aligned rows) is that view itself,
  // with no copy at all (`in_place` false asks for the copy: a CUDA graph holds one address);
  // any other frame is written into the uploader's mapped page-locked memory.
  ImageRef map(const HostImage& img, bool in_place = true);
  // After the compute stream synchronised: the times of the copies it waited for (those are
  // done). A copy it does not wait for yet (run_overlapped's next frame) is left in flight.
  void collect();

  // The last upload: GPU time of the copy (pageable, pinned: an event pair around it), or host
  // wall time of the write into mapped memory; and the host time spent staging it (the copy
  // of the frame into page-locked memory; 0 for pageable).
  double upload_ms() const { return m_upload_ms; }
  double staging_ms() const { return m_staging_ms; }

 private:
  // Page-locked host memory for uploads (rows padded like DeviceImage's for mapped use).
  struct PinnedBuffer {
    void* host = nullptr;
    void* dev = nullptr;  // its device address when mapped
    size_t pitch = 0, bytes = 0;
    bool mapped = false;
  };
  // An asynchronous copy: its event pair, the pinned frame it reads, whether it is still to be
  // collected and whether the compute stream waits for it.
  struct Copy {
    cudaEvent_t ev[2] = {nullptr, nullptr};  // copy start, copy end (= ready)
    std::shared_ptr<const uint8_t> frame;
    bool pending = false, ordered = false;
  };
  void stage(const HostImage& img, bool mapped);
  void free_staging();
  void finish(Copy& c);  // the copy is done: its time read, its frame let go
  void finish_all();     // both streams synchronised first

  cudaStream_t m_compute;
  cudaStream_t m_copy = nullptr;
  Copy m_copies[2];  // sent alternately: the current frame's and the next one's
  int m_next = 0;    // the one the next send uses
  UploadMode m_mode;
  PinnedBuffer m_pinned;
  std::shared_ptr<const uint8_t> m_in_place;  // the frame kernels read where it is (mapped)
  double m_upload_ms = 0, m_staging_ms = 0;
};

}  // namespace lab

// The keypoint front in NVIDIA NPP calls, timed as the lab times its pipeline: the peer
// benchmarks/npp_front.sh runs beside `kernel-lab bench` in one call. From a BGR frame (an .npy
// that `kernel-lab run --dump` wrote; or a gray one) to the 5x5 maxima of the Harris response at
// the letterbox size, in the NPP primitives a user would reach for:
//   ColorToGray (0.114 B + 0.587 G + 0.299 R, 8-bit) at the source size; Set (the 114 pad) and
//   Resize (bilinear) into the letterbox; FilterGaussBorder 5x5; FilterHarrisCornersBorder
//   (Sobel 3x3, 3x3 window, k = 0.04, 8-bit in, float out); FilterMaxBorder 5x5 (float).
// NPP works in 8 bits up to Harris (its Harris takes 8-bit input), so it moves fewer bytes than
// the lab's float planes; it writes no keypoints (no top-K, descriptors or normalisation).
// Prints one line of JSON: eager and CUDA-graph medians in microseconds over --reps runs after
// a warm-up, timed with CUDA events around the whole front.
//   npp_front FRAME.npy WxH [reps]
#include <cuda_runtime.h>
#include <npp.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <string>
#include <vector>

#define CHECK_CUDA(x)                                                          \
  do {                                                                         \
    cudaError_t e_ = (x);                                                      \
    if (e_ != cudaSuccess) {                                                   \
      std::fprintf(stderr, "npp_front: %s: %s\n", #x, cudaGetErrorString(e_)); \
      std::exit(70);                                                           \
    }                                                                          \
  } while (0)
#define CHECK_NPP(x)                                                       \
  do {                                                                     \
    NppStatus s_ = (x);                                                    \
    if (s_ < 0) {                                                          \
      std::fprintf(stderr, "npp_front: %s: NPP status %d\n", #x, int(s_)); \
      std::exit(70);                                                       \
    }                                                                      \
  } while (0)

// An 8-bit H x W x 3 (BGR) or H x W (gray) .npy (numpy's format 1.0/2.0 header, C order): the
// frame's bytes.
static std::vector<unsigned char> read_npy(const char* path, int& w, int& h, int& c) {
  std::ifstream f(path, std::ios::binary);
  char magic[8];
  if (!f.read(magic, 8) || std::memcmp(magic, "\x93NUMPY", 6) != 0) {
    std::fprintf(stderr, "npp_front: %s is not an .npy file\n", path);
    std::exit(65);
  }
  size_t len = 0;
  if (magic[6] == 1) {
    unsigned char b[2];
    f.read(reinterpret_cast<char*>(b), 2);
    len = b[0] | (b[1] << 8);
  } else {
    unsigned char b[4];
    f.read(reinterpret_cast<char*>(b), 4);
    len = b[0] | (b[1] << 8) | (b[2] << 16) | (size_t(b[3]) << 24);
  }
  std::string header(len, '\0');
  f.read(&header[0], std::streamsize(len));
  const size_t at = header.find("'shape': (");
  const int dims = at == std::string::npos
                       ? 0
                       : std::sscanf(header.c_str() + at, "'shape': (%d, %d, %d)", &h, &w, &c);
  if (dims == 2) c = 1;
  if (header.find("'|u1'") == std::string::npos ||
      header.find("'fortran_order': False") == std::string::npos || dims < 2 || w <= 0 || h <= 0 ||
      (c != 1 && c != 3)) {
    std::fprintf(stderr, "npp_front: %s: want an 8-bit H x W x 3 or H x W array in C order\n",
                 path);
    std::exit(65);
  }
  std::vector<unsigned char> bytes(size_t(w) * h * c);
  if (!f.read(reinterpret_cast<char*>(bytes.data()), std::streamsize(bytes.size()))) {
    std::fprintf(stderr, "npp_front: %s is shorter than its shape\n", path);
    std::exit(65);
  }
  return bytes;
}

static double median(std::vector<float> v) {
  std::sort(v.begin(), v.end());
  return v.size() % 2 ? v[v.size() / 2] : 0.5 * (v[v.size() / 2 - 1] + v[v.size() / 2]);
}

int main(int argc, char** argv) {
  if (argc < 3) {
    std::fprintf(stderr, "usage: npp_front FRAME.npy WxH [reps]\n");
    return 64;
  }
  int w = 0, h = 0, c = 0, ow = 0, oh = 0;
  const std::vector<unsigned char> frame = read_npy(argv[1], w, h, c);
  if (std::sscanf(argv[2], "%dx%d", &ow, &oh) != 2 || ow < 8 || oh < 8) {
    std::fprintf(stderr, "npp_front: bad size %s (want WxH, at least 8x8)\n", argv[2]);
    return 64;
  }
  const int reps = argc > 3 ? std::max(1, std::atoi(argv[3])) : 200;
  // The letterbox geometry the lab uses (round half to even, centred).
  const double s = std::min(double(ow) / w, double(oh) / h);
  const int rw = std::clamp(int(std::nearbyint(w * s)), 1, ow);
  const int rh = std::clamp(int(std::nearbyint(h * s)), 1, oh);
  const int ox = (ow - rw) / 2, oy = (oh - rh) / 2;

  cudaStream_t stream;
  CHECK_CUDA(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
  int dev = 0;
  CHECK_CUDA(cudaGetDevice(&dev));
  cudaDeviceProp prop{};
  CHECK_CUDA(cudaGetDeviceProperties(&prop, dev));
  NppStreamContext ctx{};
  ctx.hStream = stream;
  ctx.nCudaDeviceId = dev;
  ctx.nMultiProcessorCount = prop.multiProcessorCount;
  ctx.nMaxThreadsPerMultiProcessor = prop.maxThreadsPerMultiProcessor;
  ctx.nMaxThreadsPerBlock = prop.maxThreadsPerBlock;
  ctx.nSharedMemPerBlock = prop.sharedMemPerBlock;
  ctx.nCudaDevAttrComputeCapabilityMajor = prop.major;
  ctx.nCudaDevAttrComputeCapabilityMinor = prop.minor;
  CHECK_CUDA(cudaStreamGetFlags(stream, &ctx.nStreamFlags));

  auto alloc = [](size_t row_bytes, int rows, size_t& pitch) {
    void* p = nullptr;
    CHECK_CUDA(cudaMallocPitch(&p, &pitch, row_bytes, size_t(rows)));
    return p;
  };
  size_t src_pitch, gray_pitch, lb_pitch, blur_pitch, harris_pitch, max_pitch;
  auto* src = static_cast<Npp8u*>(alloc(size_t(w) * c, h, src_pitch));
  auto* gray = c == 1 ? src : static_cast<Npp8u*>(alloc(size_t(w), h, gray_pitch));
  if (c == 1) gray_pitch = src_pitch;  // a gray frame is its own gray plane
  auto* lb = static_cast<Npp8u*>(alloc(size_t(ow), oh, lb_pitch));
  auto* blur = static_cast<Npp8u*>(alloc(size_t(ow), oh, blur_pitch));
  auto* harris = static_cast<Npp32f*>(alloc(size_t(ow) * 4, oh, harris_pitch));
  auto* maxima = static_cast<Npp32f*>(alloc(size_t(ow) * 4, oh, max_pitch));
  CHECK_CUDA(cudaMemcpy2D(src, src_pitch, frame.data(), size_t(w) * c, size_t(w) * c, size_t(h),
                          cudaMemcpyHostToDevice));
  const NppiSize in_size{w, h}, out_size{ow, oh}, fit{rw, rh};
  int harris_buffer_bytes = 0;
  CHECK_NPP(nppiFilterHarrisCornersBorderGetBufferSize(out_size, &harris_buffer_bytes));
  Npp8u* harris_buffer = nullptr;
  CHECK_CUDA(cudaMalloc(&harris_buffer, size_t(std::max(harris_buffer_bytes, 1))));
  const Npp32f bgr_to_gray[3] = {0.114f, 0.587f, 0.299f};

  auto front = [&] {
    if (c == 3)
      CHECK_NPP(nppiColorToGray_8u_C3C1R_Ctx(src, int(src_pitch), gray, int(gray_pitch), in_size,
                                             bgr_to_gray, ctx));
    CHECK_NPP(nppiSet_8u_C1R_Ctx(114, lb, int(lb_pitch), out_size, ctx));
    CHECK_NPP(nppiResize_8u_C1R_Ctx(gray, int(gray_pitch), in_size, NppiRect{0, 0, w, h},
                                    lb + size_t(oy) * lb_pitch + ox, int(lb_pitch), fit,
                                    NppiRect{0, 0, rw, rh}, NPPI_INTER_LINEAR, ctx));
    CHECK_NPP(nppiFilterGaussBorder_8u_C1R_Ctx(lb, int(lb_pitch), out_size, NppiPoint{0, 0}, blur,
                                               int(blur_pitch), out_size, NPP_MASK_SIZE_5_X_5,
                                               NPP_BORDER_REPLICATE, ctx));
    CHECK_NPP(nppiFilterHarrisCornersBorder_8u32f_C1R_Ctx(
        blur, int(blur_pitch), out_size, NppiPoint{0, 0}, harris, int(harris_pitch), out_size,
        NPP_FILTER_SOBEL, NPP_MASK_SIZE_3_X_3, NPP_MASK_SIZE_3_X_3, 0.04f, 1.0f,
        NPP_BORDER_REPLICATE, harris_buffer, ctx));
    CHECK_NPP(nppiFilterMaxBorder_32f_C1R_Ctx(harris, int(harris_pitch), out_size, NppiPoint{0, 0},
                                              maxima, int(max_pitch), out_size, NppiSize{5, 5},
                                              NppiPoint{2, 2}, NPP_BORDER_REPLICATE, ctx));
  };

  cudaEvent_t e0, e1;
  CHECK_CUDA(cudaEventCreate(&e0));
  CHECK_CUDA(cudaEventCreate(&e1));
  auto median_us = [&](auto&& work) {
    for (int i = 0; i < 20; ++i) work();  // warm-up
    CHECK_CUDA(cudaStreamSynchronize(stream));
    std::vector<float> ms(static_cast<size_t>(reps));
    for (float& m : ms) {
      CHECK_CUDA(cudaEventRecord(e0, stream));
      work();
      CHECK_CUDA(cudaEventRecord(e1, stream));
      CHECK_CUDA(cudaEventSynchronize(e1));
      CHECK_CUDA(cudaEventElapsedTime(&m, e0, e1));
    }
    return 1000.0 * median(ms);
  };
  const double eager_us = median_us(front);
  cudaGraph_t graph;
  cudaGraphExec_t exec;
  CHECK_CUDA(cudaStreamBeginCapture(stream, cudaStreamCaptureModeThreadLocal));
  front();
  CHECK_CUDA(cudaStreamEndCapture(stream, &graph));
  CHECK_CUDA(cudaGraphInstantiate(&exec, graph, 0));
  const double graph_us = median_us([&] { CHECK_CUDA(cudaGraphLaunch(exec, stream)); });
  std::printf(
      "{\"peer\": \"npp_front\", \"input\": [%d, %d, %d], \"size\": [%d, %d], \"reps\": %d, "
      "\"eager_us\": %.2f, \"graph_us\": %.2f, \"device\": \"%s\", \"npp\": \"%d.%d.%d\"}\n",
      w, h, c, ow, oh, reps, eager_us, graph_us, prop.name, nppGetLibVersion()->major,
      nppGetLibVersion()->minor, nppGetLibVersion()->build);
  return 0;
}

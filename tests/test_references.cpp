// The CPU references: hand-worked cases (edges included), odd sizes, and, where OpenCV has the
// same operation, OpenCV itself on the real images in tests/data at the spec's tolerances.
#include <array>
#include <cmath>
#include <vector>

#include "image_source.h"
#include "support.h"
#include "registry.h"

#if defined(LAB_WITH_OPENCV)
#include <opencv2/core.hpp>
#include <opencv2/imgproc.hpp>
#endif

using namespace lab;

namespace {

HostImage plane(int w, int h, float (*f)(int, int)) {
  HostImage img(ImageDesc{w, h, 1, PixelType::F32});
  auto p = img.view<float>();
  for (int y = 0; y < h; ++y)
    for (int x = 0; x < w; ++x) p.at(x, y) = f(x, y);
  return img;
}

// Runs `op`'s reference on `inputs` with `params`; outputs are NaN-poisoned first.
std::vector<HostImage> run_ref(const std::string& op_name, const std::vector<const HostImage*>& in,
                               const ParamMap& params = {}) {
  const Op& op = find_op(op_name);
  std::vector<ImageDesc> descs;
  for (auto* i : in) descs.push_back(i->desc());
  std::vector<HostImage> out;
  for (const ImageDesc& d : op.def.shape(descs, params)) {
    out.emplace_back(d);
    poison(out.back().ref(), false);
  }
  StageArgs a;
  for (auto* i : in) a.in.push_back(i->ref());
  for (auto& o : out) a.out.push_back(o.ref());
  a.params = params;
  op.def.reference(a);
  return out;
}

bool all_finite(const HostImage& img) {
  const auto v = img.view<float>();
  for (int y = 0; y < v.height; ++y)
    for (int x = 0; x < v.width; ++x)
      if (!std::isfinite(v.at(x, y))) return false;
  return true;
}

const float kPad = 114.0f / 255.0f;

}  // namespace

TEST_SUITE("cpu") {
  TEST_CASE("letterbox: geometry, padding and a 1x1 source") {
    HostImage one(ImageDesc{1, 1, 3, PixelType::U8});
    one.bytes()[0] = 10, one.bytes()[1] = 200, one.bytes()[2] = 60;  // B, G, R
    const float gray = (0.114f * 10 + 0.587f * 200 + 0.299f * 60) / 255.0f;
    // 1x1 -> 8x4: s = min(8, 4) = 4, rw = rh = 4, placed at (2, 0).
    const auto out = run_ref("letterbox", {&one}, {{"width", 8}, {"height", 4}});
    const auto v = out[0].view<const float>();
    for (int y = 0; y < 4; ++y)
      for (int x = 0; x < 8; ++x) {
        const bool inside = x >= 2 && x < 6;
        CHECK(v.at(x, y) == doctest::Approx(inside ? gray : kPad).epsilon(1e-6));
      }
  }

  TEST_CASE("letterbox: 1920x1080 -> 1280x736 is 1280x720 placed 8 rows down") {
    const HostImage in = io::synthetic_frame(1920, 1080);
    const auto out = run_ref("letterbox", {&in});
    const auto v = out[0].view<const float>();
    CHECK(out[0].desc() == ImageDesc{1280, 736, 1, PixelType::F32});
    for (int x = 0; x < 1280; x += 97) {
      CHECK(v.at(x, 7) == kPad);
      CHECK(v.at(x, 736 - 8) == kPad);
    }
    CHECK(all_finite(out[0]));
  }

  TEST_CASE("letterbox: an exact 2x downscale averages 2x2 blocks") {
    HostImage in(ImageDesc{4, 2, 1, PixelType::U8});
    const uint8_t px[8] = {0, 255, 10, 30, 255, 0, 50, 70};
    std::copy(px, px + 8, in.bytes());
    const auto out = run_ref("letterbox", {&in}, {{"width", 2}, {"height", 1}});
    const auto v = out[0].view<const float>();
    CHECK(v.at(0, 0) == doctest::Approx(127.5 / 255).epsilon(1e-6));
    CHECK(v.at(1, 0) == doctest::Approx(40.0 / 255).epsilon(1e-6));
  }

  TEST_CASE("blur: weights, constant, impulse, border replicate") {
    // A constant stays constant (weights sum to 1).
    const HostImage c = plane(7, 5, [](int, int) { return 0.25f; });
    const auto bc = run_ref("blur", {&c});
    const auto vc = bc[0].view<const float>();
    for (int y = 0; y < 5; ++y)
      for (int x = 0; x < 7; ++x) CHECK(vc.at(x, y) == doctest::Approx(0.25f).epsilon(1e-6));
    // An impulse in the middle of a 9x9 image gives the outer product of the weights.
    const HostImage imp = plane(9, 9, [](int x, int y) { return x == 4 && y == 4 ? 1.0f : 0.0f; });
    const auto bi = run_ref("blur", {&imp});
    const double w[5] = {0.054488684982061386, 0.24420134723186493, 0.40261995792388916,
                         0.24420134723186493, 0.054488684982061386};
    for (int j = 0; j < 5; ++j)
      for (int i = 0; i < 5; ++i)
        CHECK(bi[0].view<const float>().at(2 + i, 2 + j) ==
              doctest::Approx(w[i] * w[j]).epsilon(1e-6));
    CHECK(bi[0].view<const float>().at(0, 0) == 0.0f);
    // Border replicate: an impulse at the corner counts three times along each edge direction:
    // out(0,0) = (w0 + w1 + w2) ^ 2.
    const HostImage corner =
        plane(6, 6, [](int x, int y) { return x == 0 && y == 0 ? 1.0f : 0.0f; });
    const double s = w[0] + w[1] + w[2];
    CHECK(run_ref("blur", {&corner})[0].view<const float>().at(0, 0) ==
          doctest::Approx(s * s).epsilon(1e-6));
  }

  TEST_CASE("sobel: a ramp, its border, a constant") {
    const HostImage ramp = plane(6, 5, [](int x, int) { return float(x); });
    const auto g = run_ref("sobel", {&ramp});
    const auto gx = g[0].view<const float>(), gy = g[1].view<const float>();
    for (int y = 0; y < 5; ++y) {
      CHECK(gx.at(0, y) == 4.0f);                              // replicate: (1 - 0) * (1 + 2 + 1)
      for (int x = 1; x < 5; ++x) CHECK(gx.at(x, y) == 8.0f);  // (x+1 - (x-1)) * 4
      CHECK(gx.at(5, y) == 4.0f);
      for (int x = 0; x < 6; ++x) CHECK(gy.at(x, y) == 0.0f);
    }
    const HostImage col = plane(4, 6, [](int, int y) { return float(2 * y); });
    const auto h = run_ref("sobel", {&col});
    CHECK(h[1].view<const float>().at(2, 3) == 16.0f);
    CHECK(h[0].view<const float>().at(2, 3) == 0.0f);
  }

  TEST_CASE("harris: flat is zero, an edge is negative, a corner is positive") {
    const HostImage zero = plane(5, 5, [](int, int) { return 0.0f; });
    const auto r0 = run_ref("harris", {&zero, &zero});
    CHECK(r0[0].view<const float>().at(2, 2) == 0.0f);
    // gx = 1 everywhere, gy = 0: a = 9, b = c = 0 -> R = -k * 81.
    const HostImage one = plane(5, 5, [](int, int) { return 1.0f; });
    const auto r1 = run_ref("harris", {&one, &zero}, {{"k", 0.04}});
    CHECK(r1[0].view<const float>().at(2, 2) == doctest::Approx(-0.04 * 81));
    // gx = 1 in column 0, gy = 1 in column 1 of a 2x2 image. The replicated window of (0, 0)
    // covers columns {0, 0, 1} x rows {0, 0, 1}: a = 6, c = 3, b = 0 -> R = 18 - k 81 > 0.
    const HostImage gxh = plane(2, 2, [](int x, int) { return x == 0 ? 1.0f : 0.0f; });
    const HostImage gyh = plane(2, 2, [](int x, int) { return x == 1 ? 1.0f : 0.0f; });
    const auto r2 = run_ref("harris", {&gxh, &gyh}, {{"k", 0.04}});
    CHECK(r2[0].view<const float>().at(0, 0) == doctest::Approx(18 - 0.04 * 81));
  }

  TEST_CASE("every reference on 1x1 and 17x13 writes every value") {
    for (const Block& sz : {Block{1, 1}, Block{17, 13}, Block{2, 1}, Block{1, 2}}) {
      INFO(sz.str());
      const HostImage in = io::synthetic_frame(sz.x, sz.y);
      const auto lb = run_ref("letterbox", {&in}, {{"width", sz.x}, {"height", sz.y}});
      const auto bl = run_ref("blur", {&lb[0]});
      const auto sb = run_ref("sobel", {&bl[0]});
      const auto hr = run_ref("harris", {&sb[0], &sb[1]});
      for (const HostImage* img : {&lb[0], &bl[0], &sb[0], &sb[1], &hr[0]}) CHECK(all_finite(*img));
    }
  }

#if defined(LAB_WITH_OPENCV)
  // ---- against OpenCV, on the real images ----------------------------------------------------

  cv::Mat to_mat(const HostImage& img) {
    const ImageDesc& d = img.desc();
    const int type =
        d.type == PixelType::F32 ? CV_MAKETYPE(CV_32F, d.channels) : CV_MAKETYPE(CV_8U, d.channels);
    return cv::Mat(d.height, d.width, type, const_cast<uint8_t*>(img.bytes()), img.pitch()).clone();
  }

  double max_abs_diff(const HostImage& a, const cv::Mat& b) {
    cv::Mat diff;
    cv::absdiff(to_mat(a), b, diff);
    double mx = 0;
    cv::minMaxLoc(diff, nullptr, &mx);
    return mx;
  }

  // The spec's letterbox, built from OpenCV: float conversion, cvtColor, resize, pad.
  cv::Mat opencv_letterbox(const HostImage& src, int wt, int ht) {
    cv::Mat f;
    to_mat(src).convertTo(f, CV_32F, 1.0 / 255.0);
    cv::Mat gray;
    if (src.desc().channels == 3)
      cv::cvtColor(f, gray, cv::COLOR_BGR2GRAY);
    else if (src.desc().channels == 4)
      cv::cvtColor(f, gray, cv::COLOR_BGRA2GRAY);
    else
      gray = f;
    const double s = std::min(double(wt) / src.desc().width, double(ht) / src.desc().height);
    const int rw = std::max(1, int(std::nearbyint(src.desc().width * s)));
    const int rh = std::max(1, int(std::nearbyint(src.desc().height * s)));
    cv::Mat resized;
    cv::resize(gray, resized, cv::Size(rw, rh), 0, 0, cv::INTER_LINEAR);
    cv::Mat out(ht, wt, CV_32F, cv::Scalar(114.0 / 255.0));
    resized.copyTo(out(cv::Rect((wt - rw) / 2, (ht - rh) / 2, rw, rh)));
    return out;
  }

  TEST_CASE("references match OpenCV on the real images") {
    struct Case {
      const char* file;
      int wt, ht;
    };
    const Case cases[] = {
        {"astronaut.png", 1280, 736}, {"coffee.png", 1280, 736}, {"chelsea.png", 640, 640},
        {"rocket.jpg", 1280, 736},    {"brick.png", 300, 200},   {"box.png", 1280, 736},
        {"box_in_scene.png", 97, 61}, {"graf1.png", 1000, 999},  {"chessboard.png", 1280, 736}};
    for (const Case& c : cases) {
      INFO(c.file << " -> " << c.wt << "x" << c.ht);
      const HostImage src = io::load_image(data_path(c.file));
      const auto lb = run_ref("letterbox", {&src}, {{"width", c.wt}, {"height", c.ht}});
      CHECK(max_abs_diff(lb[0], opencv_letterbox(src, c.wt, c.ht)) <= 1e-4);

      const cv::Mat lbm = to_mat(lb[0]);
      const auto bl = run_ref("blur", {&lb[0]});
      cv::Mat cvb;
      cv::GaussianBlur(lbm, cvb, cv::Size(5, 5), 1.0, 1.0, cv::BORDER_REPLICATE);
      CHECK(max_abs_diff(bl[0], cvb) <= 1e-5);

      const cv::Mat blm = to_mat(bl[0]);
      const auto sb = run_ref("sobel", {&bl[0]});
      cv::Mat cgx, cgy;
      cv::Sobel(blm, cgx, CV_32F, 1, 0, 3, 1, 0, cv::BORDER_REPLICATE);
      cv::Sobel(blm, cgy, CV_32F, 0, 1, 3, 1, 0, cv::BORDER_REPLICATE);
      CHECK(max_abs_diff(sb[0], cgx) <= 1e-5);
      CHECK(max_abs_diff(sb[1], cgy) <= 1e-5);

      // Harris from OpenCV's box filter on the products of the same gradients.
      const cv::Mat gx = to_mat(sb[0]), gy = to_mat(sb[1]);
      cv::Mat a, b, cc;
      cv::boxFilter(gx.mul(gx), a, CV_32F, cv::Size(3, 3), cv::Point(-1, -1), false,
                    cv::BORDER_REPLICATE);
      cv::boxFilter(gx.mul(gy), b, CV_32F, cv::Size(3, 3), cv::Point(-1, -1), false,
                    cv::BORDER_REPLICATE);
      cv::boxFilter(gy.mul(gy), cc, CV_32F, cv::Size(3, 3), cv::Point(-1, -1), false,
                    cv::BORDER_REPLICATE);
      const cv::Mat r = a.mul(cc) - b.mul(b) - 0.04f * (a + cc).mul(a + cc);
      const auto hr = run_ref("harris", {&sb[0], &sb[1]});
      double rmax = 0;
      cv::minMaxLoc(cv::abs(r), nullptr, &rmax);
      CHECK(rmax > 0);
      CHECK(max_abs_diff(hr[0], r) <= 1e-5 * rmax);
    }
  }

  TEST_CASE("blur weights equal OpenCV's getGaussianKernel(5, 1.0)") {
    const cv::Mat k = cv::getGaussianKernel(5, 1.0, CV_32F);
    const HostImage imp = plane(9, 1, [](int x, int) { return x == 4 ? 1.0f : 0.0f; });
    // A 1-row image: the column pass replicates the row 5 times, so out = row weights.
    const auto b = run_ref("blur", {&imp});
    for (int i = 0; i < 5; ++i)
      CHECK(b[0].view<const float>().at(2 + i, 0) == doctest::Approx(k.at<float>(i)).epsilon(1e-7));
  }

  TEST_CASE("letterbox matches OpenCV on odd sizes and upscales") {
    for (const std::array<int, 4>& c : std::vector<std::array<int, 4>>{
             {1, 1, 5, 3}, {17, 13, 64, 48}, {17, 13, 5, 9}, {333, 777, 1000, 999}, {2, 3, 1, 1}}) {
      const int sw = c[0], sh = c[1], wt = c[2], ht = c[3];
      INFO(sw << "x" << sh << " -> " << wt << "x" << ht);
      const HostImage src = io::synthetic_frame(sw, sh, 7, 3);
      const auto lb = run_ref("letterbox", {&src}, {{"width", wt}, {"height", ht}});
      CHECK(max_abs_diff(lb[0], opencv_letterbox(src, wt, ht)) <= 1e-4);
    }
  }
#endif
}

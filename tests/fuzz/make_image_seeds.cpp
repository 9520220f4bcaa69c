// Writes the image target's seeds (tests/fuzz/corpus/image/seed-*): small crops of the
// repository's test images in every format and layout the lab reads, so that the fuzzer starts
// from each decoder's real paths at a size it can mutate quickly. Run once, by hand:
//   g++ -std=c++17 tests/fuzz/make_image_seeds.cpp $(pkg-config --cflags --libs opencv4) \
//     -o /tmp/seeds && /tmp/seeds tests/data tests/fuzz/corpus/image
#include <cstdio>
#include <string>
#include <vector>

#include <opencv2/core.hpp>
#include <opencv2/imgcodecs.hpp>
#include <opencv2/imgproc.hpp>

int main(int argc, char** argv) {
  if (argc != 3) {
    std::fprintf(stderr, "usage: %s DATA_DIR OUT_DIR\n", argv[0]);
    return 64;
  }
  const std::string data = argv[1], out = argv[2];
  const cv::Mat color = cv::imread(data + "/chelsea.png", cv::IMREAD_COLOR);
  const cv::Mat gray = cv::imread(data + "/box.png", cv::IMREAD_GRAYSCALE);
  if (color.empty() || gray.empty()) return 66;
  const cv::Mat c = color(cv::Rect(100, 60, 24, 16)).clone();
  const cv::Mat g = gray(cv::Rect(120, 100, 17, 13)).clone();
  cv::Mat bgra, c16, g16;
  cv::cvtColor(c, bgra, cv::COLOR_BGR2BGRA);
  c.convertTo(c16, CV_16U, 257.0);
  g.convertTo(g16, CV_16U, 257.0);

  auto put = [&](const std::string& name, const cv::Mat& m, std::vector<int> params = {}) {
    if (!cv::imwrite(out + "/seed-" + name, m, params))
      std::fprintf(stderr, "skip %s\n", name.c_str());
  };
  put("color.png", c);
  put("gray.png", g);
  put("bgra.png", bgra);
  put("color16.png", c16);
  put("gray16.png", g16);
  put("color-filtered.png", c, {cv::IMWRITE_PNG_STRATEGY, cv::IMWRITE_PNG_STRATEGY_FILTERED});
  put("color.jpg", c, {cv::IMWRITE_JPEG_QUALITY, 80});
  put("gray.jpg", g, {cv::IMWRITE_JPEG_QUALITY, 80});
  put("progressive.jpg", c, {cv::IMWRITE_JPEG_PROGRESSIVE, 1});
  put("color.bmp", c);
  put("gray.bmp", g);
  put("color.ppm", c, {cv::IMWRITE_PXM_BINARY, 1});
  put("gray.pgm", g, {cv::IMWRITE_PXM_BINARY, 1});
  put("ascii.pgm", g, {cv::IMWRITE_PXM_BINARY, 0});
  put("color.tiff", c);
  put("gray16.tiff", g16);
  put("color.webp", c, {cv::IMWRITE_WEBP_QUALITY, 80});
  put("lossless.webp", c, {cv::IMWRITE_WEBP_QUALITY, 101});
  return 0;
}

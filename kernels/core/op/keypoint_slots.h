// The slots of the keypoint head, named once. The ops that write them (topk, sample, l2norm:
// kernels/ops/keypoints.h includes this) and the code that reads them by name (the .npy dumps,
// the GUI's keypoint overlay) all use these.
#pragma once

namespace lab::slots {

constexpr const char* kNms = "nms";                  // the suppressed response keypoints come from
constexpr const char* kKeypoints = "keypoints";      // K x 1 float triples (x, y, score)
constexpr const char* kPatches = "patches";          // K rows of 64 samples
constexpr const char* kDescriptors = "descriptors";  // K rows of 64, unit length

}  // namespace lab::slots

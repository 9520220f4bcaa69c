#!/usr/bin/env python3
"""The keypoint pipeline written with PyTorch operators, timed beside kernel-lab in one run.

    python3 scripts/torch_pipeline.py --lab build-gpu/kernel-lab [--input synthetic] [--size 1280x736] [--reps 200]
        [--preset examples/presets/fastest.json] [--json OUT.json]

Runs, on the same GPU and in the same process tree:
  1. kernel-lab bench --json on a 1920x1080 BGR frame -> 1280x736, K = 4096: the whole pipeline
     launched stage by stage and replayed as one CUDA graph;
  2. the same eight stages in PyTorch (letterbox, 5x5 Gaussian, Sobel, Harris, 5x5 NMS, topk,
     grid_sample of 8x8 patches, mean-centred L2 normalisation), eagerly and as a CUDA graph;
  3. top-K of 4096 from 2^20 scores (a 1024x1024 NMS map of a real image): kernel-lab's topk
     variants against torch.topk on the same map (dumped by kernel-lab run);
and prints them side by side. Every figure is the median of --reps runs after a warm-up, timed
with CUDA events around the work. It also reports how far the PyTorch keypoints agree with
kernel-lab's on the same letterboxed frame (precision and recall at exact positions).
"""
import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile

import numpy as np
import torch
import torch.nn.functional as F

K_HARRIS = 0.04
NMS_THRESHOLD = 1e-3


def lab(binary, *args):
    out = subprocess.run([binary, *args], check=True, capture_output=True, text=True)
    return out.stdout


def gaussian5():
    # OpenCV's getGaussianKernel(5, 1.0)
    x = torch.arange(5, dtype=torch.float64) - 2
    g = torch.exp(-x * x / 2)
    return (g / g.sum()).float()


class TorchPipeline:
    def __init__(self, h, w, out_w=1280, out_h=736, k=4096, device="cuda"):
        self.h, self.w, self.out_w, self.out_h, self.k = h, w, out_w, out_h, k
        s = min(out_w / w, out_h / h)
        self.rw, self.rh = round(w * s), round(h * s)
        self.ox, self.oy = (out_w - self.rw) // 2, (out_h - self.rh) // 2
        g = gaussian5().to(device)
        self.gx_row = g.view(1, 1, 1, 5)
        self.gy_col = g.view(1, 1, 5, 1)
        sob = torch.tensor([[-1.0, 0, 1], [-2, 0, 2], [-1, 0, 1]], device=device)
        self.sobel = torch.stack([sob, sob.t()]).view(2, 1, 3, 3)
        self.gray = torch.tensor([0.114, 0.587, 0.299], device=device).view(1, 3, 1, 1)
        t = torch.arange(64, device=device)
        self.offsets = torch.stack([2.0 * (t % 8) - 7.0, 2.0 * (t // 8) - 7.0], dim=-1)

    def letterbox(self, bgr):  # bgr: H x W x 3 (or H x W gray) uint8 on the GPU
        if bgr.dim() == 2:  # a gray image (box_in_scene.png): no colour conversion
            gray = bgr.view(1, 1, *bgr.shape).float() * (1.0 / 255.0)
        else:
            f = bgr.permute(2, 0, 1).unsqueeze(0).float() * (1.0 / 255.0)
            gray = (f * self.gray).sum(dim=1, keepdim=True)
        small = F.interpolate(gray, size=(self.rh, self.rw), mode="bilinear", align_corners=False)
        out = torch.full((1, 1, self.out_h, self.out_w), 114.0 / 255.0, device=bgr.device)
        out[:, :, self.oy:self.oy + self.rh, self.ox:self.ox + self.rw] = small
        return out

    def head(self, img):  # img: 1 x 1 x H x W float, the letterboxed frame
        blur = F.conv2d(F.pad(img, (2, 2, 0, 0), mode="replicate"), self.gx_row)
        blur = F.conv2d(F.pad(blur, (0, 0, 2, 2), mode="replicate"), self.gy_col)
        g = F.conv2d(F.pad(blur, (1, 1, 1, 1), mode="replicate"), self.sobel)
        gx, gy = g[:, :1], g[:, 1:]
        prods = torch.cat([gx * gx, gx * gy, gy * gy], dim=1)
        m = F.avg_pool2d(F.pad(prods, (1, 1, 1, 1), mode="replicate"), 3, stride=1) * 9
        a, b, c = m[:, 0], m[:, 1], m[:, 2]
        r = (a * c - b * b - K_HARRIS * (a + c) * (a + c)).unsqueeze(1)
        mx = F.max_pool2d(r, 5, stride=1, padding=2)  # pads with -inf: the clipped window
        nms = torch.where((r > NMS_THRESHOLD) & (r >= mx), r, torch.zeros_like(r))
        scores, idx = torch.topk(nms.flatten(), self.k)
        w = nms.shape[-1]
        xy = torch.stack([(idx % w).float(), (idx // w).float()], dim=-1)  # K x 2
        pts = xy.unsqueeze(1) + self.offsets.unsqueeze(0)  # K x 64 x 2, pixel coordinates
        hh, ww = blur.shape[-2:]
        grid = torch.stack([(2 * pts[..., 0] + 1) / ww - 1, (2 * pts[..., 1] + 1) / hh - 1], -1)
        patches = F.grid_sample(blur, grid.unsqueeze(0), mode="bilinear",
                                padding_mode="border", align_corners=False)[0, 0]  # K x 64
        d = patches - patches.mean(dim=-1, keepdim=True)
        desc = d * torch.rsqrt((d * d).sum(dim=-1, keepdim=True).clamp_min(1e-30))
        desc = torch.where(scores.unsqueeze(-1) > 0, desc, torch.zeros_like(desc))
        return xy, scores, desc

    def __call__(self, bgr):
        return self.head(self.letterbox(bgr))


def time_us(fn, reps, warmup=20):
    for _ in range(warmup):
        fn()
    torch.cuda.synchronize()
    times = []
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    for _ in range(reps):
        start.record()
        fn()
        end.record()
        end.synchronize()
        times.append(start.elapsed_time(end) * 1e3)
    return statistics.median(times)


def graphed(fn):
    s = torch.cuda.Stream()
    s.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(s):
        for _ in range(3):
            fn()
    torch.cuda.current_stream().wait_stream(s)
    g = torch.cuda.CUDAGraph()
    with torch.cuda.graph(g):
        fn()
    return g.replay


def output_size(text):
    """WxH, both 1 to 16384 (kernel-lab's letterbox limits), for argparse."""
    w, x, h = text.lower().partition("x")
    if not (x and w.isdigit() and h.isdigit() and 1 <= int(w) <= 16384 and 1 <= int(h) <= 16384):
        raise argparse.ArgumentTypeError(f"expected WxH with both in 1..16384, got {text!r}")
    return f"{int(w)}x{int(h)}"


def default_topk_input(lab_binary):
    """graf1.png from the test images, found where kernel-lab finds them (kernels/core/base/paths.h:
    <bin>/../share/kernel-lab/data installed, <bin>/../tests/data from a build or a bundle), else
    beside this script in the source tree."""
    bin_dir = os.path.dirname(os.path.abspath(lab_binary))
    here = os.path.dirname(os.path.abspath(__file__))
    for d in (os.path.join(bin_dir, "..", "share", "kernel-lab", "data"),
              os.path.join(bin_dir, "..", "tests", "data"),
              os.path.join(here, "..", "tests", "data")):
        path = os.path.normpath(os.path.join(d, "graf1.png"))
        if os.path.isfile(path):
            return path
    sys.exit("torch_pipeline.py: graf1.png not found beside kernel-lab or this script; "
             "pass --topk-input IMAGE")


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--lab", required=True, help="the kernel-lab binary")
    ap.add_argument("--input", default="synthetic", help="kernel-lab --input for the pipeline")
    ap.add_argument("--topk-input", default=None,
                    help="image for the top-K comparison (default: graf1.png from the test images, "
                         "found where kernel-lab finds them)")
    ap.add_argument("--reps", type=int, default=200)
    ap.add_argument("--size", default="1280x736", type=output_size,
                    help="the pipeline's output size, WxH")
    ap.add_argument("--variant", action="append", default=[],
                    help="STAGE=NAME for kernel-lab's pipeline (repeatable), e.g. nms=v5_fused_front")
    ap.add_argument("--preset", default=None, help="a kernel-lab preset for its pipeline")
    ap.add_argument("--json", default=None,
                    help="also write the whole-pipeline figures here (benchmarks/run.sh's peers)")
    a = ap.parse_args()
    variants = (["--preset", a.preset] if a.preset else []) + \
        [arg for v in a.variant for arg in ("--variant", v)]
    out_w, out_h = (int(v) for v in a.size.split("x"))
    variants += ["--size", a.size]  # kernel-lab's options for the pipeline, the size with them
    torch.backends.cudnn.benchmark = True
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False
    dev = torch.device("cuda")
    print(f"GPU: {torch.cuda.get_device_name(0)}; torch {torch.__version__}")

    with tempfile.TemporaryDirectory() as tmp:
        # The frame both sides process, and kernel-lab's results on it.
        lab(a.lab, "run", "--input", a.input, "--dump", tmp, *variants)
        bgr_np = np.load(os.path.join(tmp, "input.npy"))
        letterboxed = torch.from_numpy(np.load(os.path.join(tmp, "letterbox.npy"))).to(dev)
        lab_kp = np.load(os.path.join(tmp, "keypoints.npy"))
        bench = json.loads(lab(a.lab, "bench", "--input", a.input, "--json", "--reps",
                               str(a.reps), "--stage", "letterbox", *variants))

        h, w = bgr_np.shape[:2]
        pipe = TorchPipeline(h, w, out_w, out_h)
        bgr = torch.from_numpy(bgr_np).to(dev)
        eager_us = time_us(lambda: pipe(bgr), a.reps)
        graph_us = time_us(graphed(lambda: pipe(bgr)), a.reps)

        # Agreement on the same letterboxed frame (PyTorch's own resize differs by rounding).
        xy, scores, _ = pipe.head(letterboxed.view(1, 1, *letterboxed.shape[:2]))
        keep = scores > 0
        t_set = {(int(x), int(y)) for x, y in xy[keep].cpu().numpy()}
        l_set = {(int(x), int(y)) for x, y, _ in lab_kp}
        inter = len(t_set & l_set)

        # Top-K of 4096 from 2^20 scores: one NMS map, both sides.
        topk_input = a.topk_input or default_topk_input(a.lab)
        common = ["--input", topk_input, "--size", "1024x1024", "--param", "nms.threshold=0"]
        lab(a.lab, "run", *common, "--dump", tmp)
        nms = torch.from_numpy(np.load(os.path.join(tmp, "nms.npy"))).to(dev).flatten()
        survivors = int((nms != 0).sum())
        torch_topk_us = time_us(lambda: torch.topk(nms, 4096), a.reps)
        topk_bench = json.loads(lab(a.lab, "bench", *common, "--stage", "topk",
                                    "--sweep-variants", "--json", "--reps", str(a.reps)))

    kind = "gray" if bgr_np.ndim == 2 else "BGR"
    print(f"\nwhole pipeline, {a.input} {w}x{h} {kind} -> {a.size}, K = 4096 "
          f"(median of {a.reps}, us/frame){' with ' + ' '.join(a.variant) if a.variant else ''}")
    print(f"  kernel-lab, stage by stage on a stream  {bench['frame_stream_median_us']:9.1f}")
    print(f"  kernel-lab, one CUDA graph              {bench['frame_graph_median_us']:9.1f}")
    print(f"  PyTorch eager                           {eager_us:9.1f}")
    print(f"  PyTorch CUDA graph                      {graph_us:9.1f}")
    print(f"  speed-up over PyTorch: {eager_us / bench['frame_stream_median_us']:.1f}x eager, "
          f"{graph_us / bench['frame_graph_median_us']:.1f}x graph vs graph")
    print(f"  keypoints on the same letterboxed frame: kernel-lab {len(l_set)}, PyTorch "
          f"{len(t_set)}, common {inter} (precision {inter / max(1, len(l_set)):.3f}, recall "
          f"{inter / max(1, len(t_set)):.3f})")
    if a.json:  # through a temporary name: a reader never sees half a file
        with open(a.json + ".tmp", "w") as f:
            json.dump({"gpu": torch.cuda.get_device_name(0), "torch": torch.__version__,
                       "reps": a.reps, "lab_frame_graph_us": bench["frame_graph_median_us"],
                       "lab_frame_stream_us": bench["frame_stream_median_us"],
                       "torch_graph_us": graph_us, "torch_eager_us": eager_us,
                       "lab_state": bench.get("frame_graph_state")}, f, indent=1)
        os.replace(a.json + ".tmp", a.json)
    print(f"\ntop-K of 4096 from 1024x1024 = 2^20 scores ({survivors} non-zero), us")
    print(f"  torch.topk                              {torch_topk_us:9.1f}")
    totals = {}
    for row in topk_bench["launches"]:
        if row["stage"] == "topk":
            totals.setdefault(row["variant"], []).append(row)
    for variant, rows in totals.items():
        tot = [r for r in rows if r["total"]]
        us = tot[0]["median_us"] if tot else rows[0]["median_us"]
        print(f"  kernel-lab topk/{variant:<22} {us:9.1f}  ({us / torch_topk_us:.2f}x torch.topk)")
    return 0


if __name__ == "__main__":
    sys.exit(main())

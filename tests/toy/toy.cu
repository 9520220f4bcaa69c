// toy: an op that exists only to prove that adding one takes one file and one line. The test
// build (tests/CMakeLists.txt) compiles this file beside the lab's own and a registry whose list
// is kernels/core/op/ops.def plus one line (tests/toy/toy_ops.def); tests/toy/toy_op_test.sh then
// finds it in `list`, checks it, benches it and sweeps its blocks, with nothing else changed.
// out[i] = in[i] + 1 over a float array. Exact.
//
// Variants:
//   v1_flat      one element per thread, any 1-D block.
//   v2_template  the block size a template parameter: only its instances (64x1, 256x1) exist,
//                and they are the variant's allowed blocks.
#include <vector>

#include "lab_common.cuh"

namespace lab::ops {

constexpr long long TOY_MAX = 1LL << 24;

inline LabSlots toy_inputs(const std::string& size) {
  return array_inputs(size, "toy", TOY_MAX, PixelType::F32);
}

inline std::vector<ImageDesc> toy_shape(const std::vector<ImageDesc>& in, const ParamMap&) {
  return {require_array("toy", in[0], PixelType::F32, TOY_MAX)};
}

inline void toy_reference(const StageArgs& a) {
  const float* in = a.in[0].view<const float>().row(0);
  float* out = a.out[0].view<float>().row(0);
  const long long n = array_len(a.in[0].desc);
  for (long long i = 0; i < n; ++i) out[i] = in[i] + 1.0f;
}

}  // namespace lab::ops

namespace lab::ops::LAB_MATH_NS {

__global__ void toy_v1_flat_kernel(const float* __restrict__ in, float* __restrict__ out, int n) {
  const int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) out[i] = in[i] + 1.0f;
}

template <int BX>
__global__ void __launch_bounds__(BX)
    toy_v2_template_kernel(const float* __restrict__ in, float* __restrict__ out, int n) {
  const int i = blockIdx.x * BX + threadIdx.x;
  if (i < n) out[i] = in[i] + 1.0f;
}

static void toy_launch_v1(LaunchContext& ctx, const StageArgs& a) {
  const int n = int(array_len(a.in[0].desc));
  launch(ctx, "toy_v1_flat", toy_v1_flat_kernel, dim3(unsigned((n + a.block.x - 1) / a.block.x)),
         dim3(a.block.x), 0, a.in[0].view<const float>().row(0), a.out[0].view<float>().row(0), n);
}

template <int BX>
static void toy_launch_v2_instance(LaunchContext& ctx, const StageArgs& a) {
  static const std::string name = instance_name("toy_v2_template", BX, 1);
  const int n = int(array_len(a.in[0].desc));
  launch(ctx, name.c_str(), toy_v2_template_kernel<BX>, dim3(unsigned((n + BX - 1) / BX)), dim3(BX),
         0, a.in[0].view<const float>().row(0), a.out[0].view<float>().row(0), n);
}

using ToyBlocks = BlockInstances<B<64, 1>, B<256, 1>>;
static void toy_launch_v2(LaunchContext& ctx, const StageArgs& a) {
  ToyBlocks::dispatch(a.block, "toy v2_template",
                      [&](auto x, auto) { toy_launch_v2_instance<decltype(x)::value>(ctx, a); });
}

OpDef toy_op(const OpLookup&) {
  OpDef op;
  op.name = "toy";
  op.summary = "out[i] = in[i] + 1 (the test build's proof that an op is one file and one line)";
  op.inputs = {"input"};
  op.outputs = {"toy"};
  op.shape = toy_shape;
  op.reference = toy_reference;
  op.tol_precise = {0, 0};
  op.tol_fast = {0, 0};
  op.tol_why = "x + 1 is one correctly rounded float add, on the GPU as on the CPU";
  op.lab_inputs = toy_inputs;
  op.lab_fill = fill_uniform_pm1;
  op.lab_size_help = "N or 2^k: float elements (1 to 2^24)";
  op.lab_default_size = "2^20";
  op.story = "Not a lesson: the op the tests add to prove the registry follows from its list.";
  // clang-format off
  op.variants = {
      {"v1_flat", "one element per thread", {{64, 1}, {128, 1}, {256, 1}}, {128, 1},
       toy_launch_v1, nullptr},
      {"v2_template", "the block size a template parameter: its instances are its blocks",
       ToyBlocks::blocks(), {256, 1}, toy_launch_v2, nullptr},
  };
  // clang-format on
  op.variants[0].expect = "As fast as a copy of the array allows.";
  op.variants[1].expect = "The same as v1.";
  op.default_variant = "v1_flat";
  return op;
}

}  // namespace lab::ops::LAB_MATH_NS

// Presets (kernels/core/run/presets.h): the round trip, and every way a preset file can be bad,
// read by the engine and by `--preset` on the command line.
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <map>
#include <string>

#include <nlohmann/json.hpp>

#include "presets.h"
#include "support.h"

using namespace lab;
namespace fs = std::filesystem;

TEST_SUITE("cpu") {
  TEST_CASE("presets: round trip, corrupt, newer, invalid") {
    PipelineConfig p = default_pipeline();
    apply_variant(p, "blur=v3_smem_tile");
    apply_block(p, "blur=16x16");
    apply_math(p, "sobel=fast");
    apply_param(p, "harris.k=0.06");
    const PresetLoad back = preset_from_json(preset_to_json(p));
    CHECK(back.warning.empty());
    REQUIRE(back.pipeline.stages.size() == p.stages.size());
    CHECK(back.pipeline.stages[1].variant == "v3_smem_tile");
    CHECK(back.pipeline.stages[1].block == Block{16, 16});
    CHECK(back.pipeline.stages[2].math == MathMode::Fast);
    CHECK(back.pipeline.stages[3].params.at("k") == doctest::Approx(0.06));

    for (const char* bad :
         {"{", "[]", "{\"schema\": 1}", "{\"schema\": 1, \"pipeline\": [{\"op\": \"nope\"}]}",
          "{\"schema\": 1, \"pipeline\": [{\"op\": \"blur\", \"block\": \"64x32\"}]}"}) {
      INFO(std::string(bad));
      const PresetLoad r = preset_from_json(bad);
      CHECK(!r.warning.empty());
      CHECK(r.pipeline.stages.size() == default_pipeline().stages.size());  // the defaults
    }
    const PresetLoad newer = preset_from_json("{\"schema\": 99, \"pipeline\": []}");
    CHECK(newer.warning.find("newer") != std::string::npos);
    // Schemas no int holds (1e300 was undefined behaviour in get<int>, found by the fuzzer),
    // fractions, zero and negatives: refused or newer, never converted.
    for (const char* schema : {"1e300", "-1e300", "1.5", "0", "-3", "-9223372036854775808"}) {
      INFO(std::string(schema));
      const PresetLoad r =
          preset_from_json(std::string("{\"schema\": ") + schema + ", \"pipeline\": []}");
      CHECK(r.warning.find("not a positive integer") != std::string::npos);
    }
    for (const char* schema : {"2", "4294967297", "18446744073709551615"}) {
      INFO(std::string(schema));
      const PresetLoad r =
          preset_from_json(std::string("{\"schema\": ") + schema + ", \"pipeline\": []}");
      CHECK(r.warning.find("newer") != std::string::npos);
    }

    const fs::path f =
        fs::temp_directory_path() / ("lab_preset_" + std::to_string(::getpid()) + ".json");
    save_preset(f.string(), p);
    CHECK(load_preset(f.string()).warning.empty());
    fs::remove(f);
    CHECK(load_preset(f.string()).warning.find("no preset") != std::string::npos);
  }

  TEST_CASE(
      "presets: a retired variant becomes its successor, an unknown one the default; the "
      "rest is kept") {
    // Every entry names a variant its op no longer has, a successor its successor's op has, and
    // a commit.
    for (const RetiredVariant& r : retired_variants()) {
      const std::string entry = std::string(r.op) + "/" + r.name;
      INFO(entry);
      const Op& op = find_op(r.op);
      CHECK(op.find_variant(r.name) < 0);
      CHECK(find_op(r.successor_op ? r.successor_op : r.op).find_variant(r.successor) >= 0);
      CHECK_FALSE(successor_of(r.op, r.name).empty());
      CHECK(std::string(r.last_commit).size() >= 7);
      CHECK(std::string(r.last_commit).find_first_not_of("0123456789abcdef") == std::string::npos);
    }
    CHECK(successor_of("topk", "v5_in_flight").empty());
    CHECK(successor_of("blur", "v13_letterboxed_front").empty());  // another op's name
    CHECK(successor_of("topk", "v6_in_flight") == "v5_in_flight");
    CHECK(successor_of("topk", "v16_overlapped") == "detect/v4_split_overlapped");
    CHECK(successor_of("topk", "v13_letterboxed_front") == "detect/v3_selected_once");

    PipelineConfig p = default_pipeline();
    apply_variant(p, "blur=v3_smem_tile");
    apply_block(p, "blur=16x16");
    apply_param(p, "harris.k=0.06");
    apply_param(p, "topk.k=300");
    apply_block(p, "topk=128x1");
    const nlohmann::json saved = nlohmann::json::parse(preset_to_json(p));
    REQUIRE(saved["pipeline"][5]["op"] == "topk");
    // Saved by a build that still had the variant; with it, a block the successor may refuse.
    auto with = [&](const std::string& topk_variant, const std::string& block) {
      nlohmann::json j = saved;
      j["pipeline"][5]["variant"] = topk_variant;
      if (!block.empty()) j["pipeline"][5]["block"] = block;
      return j.dump(2);
    };
    const PresetLoad retired = preset_from_json(with("v8_shared_select", "1024x1"));
    MESSAGE(retired.warning);
    CHECK(retired.warning == "topk: v8_shared_select was retired, v6_shared_select runs instead");
    const StageConfig& topk = retired.pipeline.stages.at(5);
    CHECK(topk.variant == "v6_shared_select");
    CHECK(topk.block == Block{1024, 1});
    CHECK(topk.params.at("k") == 300);
    CHECK(retired.pipeline.stages.at(1).variant == "v3_smem_tile");  // the rest as saved
    CHECK(retired.pipeline.stages.at(1).block == Block{16, 16});
    CHECK(retired.pipeline.stages.at(3).params.at("k") == doctest::Approx(0.06));

    // Retired, and its block is not one the successor takes: the successor's default block.
    const PresetLoad reblocked = preset_from_json(with("v8_shared_select", ""));
    CHECK(reblocked.warning.find("at its default block; 128x1 does not fit it") !=
          std::string::npos);
    CHECK_FALSE(reblocked.pipeline.stages.at(5).block.has_value());

    // Moved to another op: topk runs its default (its parameters kept), and the detect stage
    // joins after it with the successor, the block and the math mode.
    const PresetLoad moved = preset_from_json(with("v16_overlapped", ""));
    CHECK(moved.warning ==
          "topk: v16_overlapped moved to stage detect as v4_split_overlapped (topk runs its "
          "default)");
    REQUIRE(moved.pipeline.stages.size() == 9);
    CHECK(moved.pipeline.stages.at(5).variant.empty());
    CHECK_FALSE(moved.pipeline.stages.at(5).block.has_value());
    CHECK(moved.pipeline.stages.at(5).params.at("k") == 300);
    CHECK(moved.pipeline.stages.at(6).op == "detect");
    CHECK(moved.pipeline.stages.at(6).variant == "v4_split_overlapped");
    CHECK(moved.pipeline.stages.at(6).block == Block{128, 1});
    CHECK(moved.pipeline.stages.at(7).op == "sample");
    CHECK(moved.pipeline.stages.at(1).variant == "v3_smem_tile");

    // Unknown (a typo, or a later build's step): the op's default, the rest kept.
    const PresetLoad unknown = preset_from_json(with("v99_from_the_future", ""));
    CHECK(unknown.warning ==
          "topk: v99_from_the_future is not a variant, " +
              find_op("topk").def.variants[find_op("topk").default_variant()].name +
              " runs instead (at its default block; 128x1 does not fit it)");
    CHECK_FALSE(unknown.pipeline.stages.at(5).block.has_value());
    CHECK(unknown.pipeline.stages.at(1).variant == "v3_smem_tile");
    CHECK(unknown.pipeline.stages.at(5).params.at("k") == 300);

    // On the command line a retired name is an error that names the successor.
    for (const auto& [name, next] : std::vector<std::pair<std::string, std::string>>{
             {"v7_binned_rank", "v6_shared_select"},
             {"v16_overlapped", "detect/v4_split_overlapped"}}) {
      PipelineConfig cli = default_pipeline();
      apply_variant(cli, "topk=" + name);
      const std::string want = "was retired: its successor is " + next;
      try {
        resolve(cli, nullptr);
        FAIL("a retired variant resolved");
      } catch (const Error& e) {
        CHECK(std::string(e.what()).find(want) != std::string::npos);
      }
    }
  }

  TEST_CASE("pipelines: an on-demand stage joins where it is named, in ops.def order") {
    PipelineConfig p = default_pipeline();
    CHECK(p.stages.size() == 8);
    CHECK(can_add_stage(p, "detect"));
    CHECK_FALSE(can_add_stage(p, "topk"));  // there already, and not on demand
    CHECK_FALSE(can_add_stage(p, "nope"));
    CHECK_FALSE(can_add_stage(default_pipeline("harris"), "detect"));
    CHECK_FALSE(can_add_stage(default_pipeline("matmul"), "detect"));
    apply_variant(p, "detect=v2_counted_rank");
    CHECK_FALSE(can_add_stage(p, "detect"));  // there already
    REQUIRE(p.stages.size() == 9);
    CHECK(p.stages[5].op == "topk");
    CHECK(p.stages[6].op == "detect");
    CHECK(p.stages[6].variant == "v2_counted_rank");
    apply_block(p, "detect=32x1");  // the same stage, not a second one
    CHECK(p.stages.size() == 9);
    CHECK(p.stages[6].block == Block{32, 1});
    CHECK(remove_stage(p, "detect"));
    CHECK(p.stages.size() == 8);
    CHECK_FALSE(remove_stage(p, "detect"));
    CHECK_FALSE(remove_stage(p, "topk"));  // not on demand: stays
    CHECK(p.stages.size() == 8);
    // Not in the harris pipeline (no nms or topk to do the work of), nor in a playground.
    PipelineConfig h = default_pipeline("harris");
    CHECK_THROWS_WITH_AS(apply_variant(h, "detect=v1_listed"),
                         "stage 'detect' is not in this pipeline", Error);
    PipelineConfig m = default_pipeline("matmul");
    CHECK_THROWS_AS(apply_variant(m, "detect=v1_listed"), Error);
    // The fastest configuration adds it.
    PipelineConfig f = default_pipeline();
    apply_fastest(f);
    CHECK(f.stages.size() == 9);
    CHECK(resolve(f, nullptr).size() == 9);
    // On the command line: --stage adds it for check and bench; a pipeline that cannot hold it
    // is a usage error (64).
    const std::string in = " --device cpu --input synthetic:320x200 --size 160x96 ";
    const Result check = lab_cli("check" + in + "--stage detect --quick", 60);
    INFO(check.out);
    CHECK(check.code == 0);
    CHECK(has(check, "detect     cpu reference"));
    const Result harris = lab_cli("check" + in + "--pipeline harris --stage detect", 60);
    CHECK(harris.code == 64);
    CHECK(has(harris, "stage 'detect' is not in this pipeline"));
    const Result run = lab_cli("run" + in + "--variant detect=v1_listed", 60);
    CHECK(run.code == 0);
    CHECK(has(run, "skipped: fused into detect/v1_listed"));
  }

  TEST_CASE("presets: the shipped examples/presets/fastest.json loads as it is and runs") {
    const char* env = std::getenv("LAB_EXAMPLES_DIR");
    const fs::path file =
        fs::path(env && *env ? env : LAB_EXAMPLES_DIR).parent_path() / "presets" / "fastest.json";
    const PresetLoad r = load_preset(file.string());
    CHECK_MESSAGE(r.warning.empty(), r.warning);
    REQUIRE(r.pipeline.stages.size() == default_pipeline().stages.size() + 1);  // detect
    std::map<std::string, std::string> variant;
    for (const StageConfig& s : r.pipeline.stages) variant[s.op] = s.variant;
    // The file and the GUI's "fastest" button (fastest_variants) say the same.
    for (const std::string& v : fastest_variants()) {
      const size_t eq = v.find('=');
      CHECK_MESSAGE(variant[v.substr(0, eq)] == v.substr(eq + 1), v);
    }
    CHECK(variant["nms"] == "v5_fused_front");
    // The file is `list --fastest-preset`'s output, byte for byte: regenerated from the code.
    std::ifstream in(file, std::ios::binary);
    const std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    const Result made = lab_cli("list --fastest-preset");
    CHECK(made.code == 0);
    const std::string how = "regenerate it: kernel-lab list --fastest-preset > " + file.string();
    CHECK_MESSAGE(made.out == text, how);
    // The CLI takes it (on the CPU: the fused variants' own references).
    const Result run = lab_cli(
        "run --device cpu --input synthetic:320x200 --size 160x96 --preset " + file.string());
    INFO(run.out);
    CHECK(run.code == 0);
    CHECK(has(run, "skipped: fused into detect/v4_split_overlapped"));
    CHECK(has(run, "skipped: fused into l2norm/v5_overlapped"));
  }

  TEST_CASE("presets: wrong types, 100,000 levels deep, or not JSON: a warning and the defaults") {
    const std::string deep = std::string(100000, '[') + std::string(100000, ']');
    const std::string wide =
        "{\"schema\": 1, \"pipeline\": [" + std::string(5000, '[') + std::string(5000, ']') + "]}";
    for (const std::string& bad :
         {deep, wide, std::string("{\"schema\": \"one\", \"pipeline\": []}"),
          std::string("{\"schema\": 1, \"pipeline\": {\"op\": 3}}"),
          std::string("{\"schema\": 1, \"pipeline\": [{\"op\": \"blur\", \"params\": "
                      "{\"k\": \"x\"}}]}"),
          std::string("\xff\xfe\x00garbage"), std::string()}) {
      const PresetLoad r = preset_from_json(bad, default_pipeline("harris"));
      CHECK(!r.warning.empty());
      CHECK(r.pipeline.stages.size() == default_pipeline("harris").stages.size());
    }
    CHECK(preset_from_json(deep).warning.find("levels deep") != std::string::npos);
  }

  TEST_CASE("presets: --preset FILE on the command line, its warning, the options over it") {
    const fs::path d = fs::temp_directory_path() / ("lab_presets_" + std::to_string(::getpid()));
    fs::create_directories(d);
    PipelineConfig p = default_pipeline("harris");
    apply_variant(p, "blur=v3_smem_tile");
    save_preset((d / "p.json").string(), p);
    const std::string in = " --device cpu --input synthetic:48x32 --size 48x32 ";
    const Result ok = lab_cli("run" + in + "--preset " + (d / "p.json").string(), 60);
    CHECK(ok.code == 0);
    CHECK(has(ok, "blur       v3_smem_tile"));
    CHECK(!has(ok, "warning"));
    // An option on the command line wins over the preset.
    const Result over =
        lab_cli("run" + in + "--preset " + (d / "p.json").string() + " --variant blur=v4_rows", 60);
    CHECK(over.code == 0);
    CHECK(has(over, "blur       v4_rows"));
    {
      std::ofstream f(d / "deep.json");
      f << std::string(100000, '{');
    }
    const Result deep = lab_cli("run" + in + "--preset " + (d / "deep.json").string(), 60);
    CHECK(deep.code == 0);  // the defaults, with the warning
    CHECK(has(deep, "warning: "));
    CHECK(has(deep, "levels deep"));
    const Result missing = lab_cli("run" + in + "--preset " + (d / "none.json").string(), 60);
    CHECK(missing.code == 66);
    fs::remove_all(d);
  }
}

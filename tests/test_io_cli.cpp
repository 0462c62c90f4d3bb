// The `quanta` command on model files: inspect / quantize / check succeed end to end, and a
// bad file or argument ends with one line on stderr naming the problem and exit code 2.
#include <gtest/gtest.h>
#include <sys/wait.h>

#include <cstdlib>
#include <fstream>
#include <sstream>

#include "test_io_util.hpp"

namespace quanta {
namespace {

#ifdef QUANTA_CLI

namespace fs = std::filesystem;
const fs::path kFixtures = QUANTA_FIXTURE_DIR;

struct Run {
  int code = -1;
  std::string out, err;
};

Run run(const std::string& args, const test::TempDir& dir) {
  const auto out = dir / "stdout.txt", err = dir / "stderr.txt";
  const std::string cmd = std::string("'") + QUANTA_CLI + "' " + args + " > '" + out.string() +
                          "' 2> '" + err.string() + "' < /dev/null";
  const int rc = std::system(cmd.c_str());
  Run r;
  r.code = WIFEXITED(rc) ? WEXITSTATUS(rc) : 128 + WTERMSIG(rc);
  auto slurp = [](const fs::path& p) {
    std::ifstream f(p);
    std::stringstream s;
    s << f.rdbuf();
    return s.str();
  };
  r.out = slurp(out);
  r.err = slurp(err);
  return r;
}

// One line on stderr, "quanta: ..." naming `what`, and exit code 2.
void expect_one_line_error(const Run& r, const std::string& what) {
  EXPECT_EQ(r.code, 2) << r.err;
  EXPECT_EQ(r.err.rfind("quanta: ", 0), 0u) << r.err;
  EXPECT_EQ(std::count(r.err.begin(), r.err.end(), '\n'), 1) << r.err;
  EXPECT_NE(r.err.find(what), std::string::npos) << r.err;
}

TEST(IoCli, InspectFixtures) {
  test::TempDir dir;
  auto r = run("inspect '" + (kFixtures / "gguf" / "tiny.gguf").string() + "'", dir);
  EXPECT_EQ(r.code, 0) << r.err;
  EXPECT_NE(r.out.find("Q4_K"), std::string::npos);
  EXPECT_NE(r.out.find("tokenizer.ggml.tokens = [string x 4"), std::string::npos);
  EXPECT_NE(r.out.find("no (listed only)"), std::string::npos);
  r = run("inspect '" + (kFixtures / "mlx" / "tiny").string() + "' --filter 'proj'", dir);
  EXPECT_EQ(r.code, 0) << r.err;
  EXPECT_NE(r.out.find("affine-3b-g32 f32"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("nvfp4"), std::string::npos);
  EXPECT_EQ(r.out.find("model.norm.weight"), std::string::npos);  // filtered out
  EXPECT_NE(r.out.find("total:"), std::string::npos);
}

TEST(IoCli, QuantizeCheckInspectEndToEnd) {
  test::TempDir dir;
  const std::string synth = std::string(QUANTA_SOURCE_DIR) + "/scripts/synth_checkpoint.py";
  if (std::system("python3 -c 'import numpy' > /dev/null 2>&1") != 0)
    GTEST_SKIP() << "numpy is not importable";
  ASSERT_EQ(std::system(("python3 " + synth + " '" + (dir / "dense").string() +
                         "' --layers 2 --hidden 128 --intermediate 256 --vocab 512 --heads 2 "
                         "--kv-heads 1 > /dev/null")
                            .c_str()),
            0);
  const std::string dense = "'" + (dir / "dense").string() + "'",
                    q = "'" + (dir / "q").string() + "'";
  auto r = run("quantize " + dense + " " + q + " --bits 4 --group 64 --quiet", dir);
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_NE(r.out.find("quantized 16 of 21 tensors to affine-4b-g64"), std::string::npos) << r.out;
  r = run("check " + dense + " " + q + " --max-rel-l2 0.2", dir);
  EXPECT_EQ(r.code, 0) << r.err;
  EXPECT_NE(r.out.find("check: 16 quantized tensors"), std::string::npos) << r.out;
  r = run("check " + dense + " " + q + " --max-rel-l2 0.01", dir);
  expect_one_line_error(r, "exceeds --max-rel-l2");
  r = run("inspect " + q + " --no-tensors", dir);
  EXPECT_EQ(r.code, 0) << r.err;
  EXPECT_NE(r.out.find("quantization: affine-4b-g64"), std::string::npos) << r.out;
  r = run("quantize " + dense + " " + q + " --dry-run --mode mxfp4", dir);
  EXPECT_EQ(r.code, 0) << r.err;
  EXPECT_NE(r.out.find("would be quantized to mxfp4"), std::string::npos) << r.out;
  // Refusals.
  expect_one_line_error(run("quantize " + dense + " " + q, dir), "--force");
  expect_one_line_error(run("quantize " + dense + " " + q + "2 --bits 7", dir), "bits");
  expect_one_line_error(run("quantize " + dense + " " + q + "2 --mode nvfp4 --group 32", dir),
                        "--group 32");
  expect_one_line_error(run("quantize " + dense + " " + q + "2 --skip '('", dir), "--skip");
  EXPECT_EQ(run("quantize --help", dir).code, 0);
}

TEST(IoCli, BadFilesEndWithOneLineAndExitCode2) {
  test::TempDir dir;
  auto long_header = test::safetensors_bytes("{}");
  long_header[0] = std::byte{200};  // header length past the end of the file
  std::vector<std::pair<std::string, std::vector<std::byte>>> files = {
      {"short.safetensors", test::to_bytes("abc")},
      {"longhdr.safetensors", long_header},
      {"badjson.safetensors", test::safetensors_bytes("{\"a\":")},
      {"dtype.safetensors",
       test::safetensors_bytes(R"({"t":{"dtype":"Q9","shape":[1],"data_offsets":[0,1]}})",
                               std::vector<std::byte>(1))},
      {"bad.gguf", test::to_bytes("GGUF\x01\x00\x00\x00")},
      {"magic.gguf", test::to_bytes("NOPE, not gguf at all")},
  };
  for (const auto& [name, bytes] : files) {
    test::write_file(dir / name, bytes);
    SCOPED_TRACE(name);
    expect_one_line_error(run("inspect '" + (dir / name).string() + "'", dir), name);
  }
  expect_one_line_error(run("inspect '" + (dir / "missing").string() + "'", dir), "missing");
  expect_one_line_error(run("check '" + (dir / "short.safetensors").string() + "' '" +
                                (dir / "short.safetensors").string() + "'",
                            dir),
                        "short.safetensors");
}

#else
TEST(IoCli, NeedsTheTool) {
  GTEST_SKIP() << "built without the quanta tool";
}
#endif

}  // namespace
}  // namespace quanta

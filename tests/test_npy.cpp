// .npy reading and writing (src/harness/io/npy.hpp): round trips, the byte layout checked against the format
// specification with hand-built files, interoperability with NumPy itself when a Python with NumPy is
// installed, and a UsageError naming the flag and the reason for every kind of malformed file.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <initializer_list>
#include <iterator>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include <unistd.h>

#include <fmt/format.h>

#include "harness/io/npy.hpp"
#include "model/errors.hpp"
#include "npy_support.hpp"
#include "temp_dir_support.hpp"

namespace faprobe {
namespace {

namespace fs = std::filesystem;
using namespace npy_test;

// fp32 values as their little-endian bytes.
std::string f32_bytes(std::initializer_list<float> values) {
  std::string out;
  for (float value : values) {
    std::uint32_t bits;
    std::memcpy(&bits, &value, 4);
    out += le32(bits);
  }
  return out;
}

std::string dict_f4(const std::string& shape) {
  return "{'descr': '<f4', 'fortran_order': False, 'shape': " + shape + ", }";
}

std::vector<std::int64_t> shape_of(const HostTensor& t) { return {t.batch(), t.seq(), t.heads(), t.head_dim()}; }

class NpyTest : public test_support::TempDirTest {
 protected:

  // Writes `bytes` to a file, reads it as --flag, and returns the UsageError's message ("" if none).
  std::string read_error(const std::string& bytes, const std::string& flag = "--q",
                         const std::string& name = "bad.npy") {
    const std::string file = path(name);
    write_bytes(file, bytes);
    return error_of(file, flag);
  }
  static std::string error_of(const std::string& file, const std::string& flag) {
    try {
      read_npy(file, flag);
    } catch (const UsageError& error) {
      const std::string message = error.what();
      EXPECT_EQ(message.find('\n'), std::string::npos) << "not one line: " << message;
      EXPECT_EQ(message.rfind(flag + " " + file + ": ", 0), 0u) << "does not name flag and file: " << message;
      return message;
    }
    ADD_FAILURE() << file << " was accepted";
    return "";
  }

};

HostTensor patterned(DType dtype, std::int64_t b, std::int64_t s, std::int64_t h, std::int64_t d) {
  HostTensor t(dtype, b, s, h, d);
  for (std::int64_t i = 0; i < t.elements(); ++i) t.set(i, float(i % 97) * 0.25f - 12.0f);
  return t;
}

// ---------------------------------------------------------------------------------------------------------
// Round trips

TEST_F(NpyTest, Fp32RoundTripIsBitExact) {
  HostTensor t(DType::fp32, 2, 17, 4, 64);
  std::mt19937 rng(7);
  std::normal_distribution<float> normal;
  for (std::int64_t i = 0; i < t.elements(); ++i) t.set(i, normal(rng) * 1e3f);
  // Values whose bits a sloppy reader or writer would change.
  const float specials[] = {-0.0f, std::numeric_limits<float>::infinity(), -std::numeric_limits<float>::infinity(),
                            std::numeric_limits<float>::quiet_NaN(), std::numeric_limits<float>::denorm_min(),
                            std::numeric_limits<float>::max(), std::numeric_limits<float>::lowest()};
  for (std::size_t i = 0; i < std::size(specials); ++i) t.set(std::int64_t(i) * 31, specials[i]);

  write_npy(path("q.npy"), t);
  const HostTensor back = read_npy(path("q.npy"), "--q");
  EXPECT_EQ(back.dtype(), DType::fp32);
  EXPECT_EQ(back.batch(), 2);
  EXPECT_EQ(back.seq(), 17);
  EXPECT_EQ(back.heads(), 4);
  EXPECT_EQ(back.head_dim(), 64);
  EXPECT_EQ(std::memcmp(back.data<float>(), t.data<float>(), std::size_t(t.elements()) * 4), 0);
}

TEST_F(NpyTest, Fp16RoundTripIsBitExact) {
  HostTensor t(DType::fp16, 1, 5, 3, 7);
  for (std::int64_t i = 0; i < t.elements(); ++i) t.set(i, std::ldexp(float(i) - 50.0f, int(i % 9) - 4));
  t.set(0, -0.0f);
  t.set(1, 65504.0f);  // fp16's largest finite value
  write_npy(path("k.npy"), t);
  const HostTensor back = read_npy(path("k.npy"), "--k");
  EXPECT_EQ(back.dtype(), DType::fp16);
  EXPECT_EQ(shape_of(back), shape_of(t));
  EXPECT_EQ(std::memcmp(back.data<Eigen::half>(), t.data<Eigen::half>(), std::size_t(t.elements()) * 2), 0);
}

TEST_F(NpyTest, Bf16WidensExactlyAndReadsBackAsFp32) {
  HostTensor t(DType::bf16, 3, 2, 2, 16);
  std::mt19937 rng(11);
  std::normal_distribution<float> normal;
  for (std::int64_t i = 0; i < t.elements(); ++i) t.set(i, normal(rng) * 1e20f);
  write_npy(path("v.npy"), t);
  const HostTensor back = read_npy(path("v.npy"), "--v");
  EXPECT_EQ(back.dtype(), DType::fp32);
  EXPECT_EQ(shape_of(back), shape_of(t));
  for (std::int64_t i = 0; i < t.elements(); ++i) ASSERT_EQ(back.get(i), t.get(i)) << "element " << i;
}

TEST_F(NpyTest, WriteToAnUnwritablePathNamesTheFile) {
  const std::string file = path("no/such/dir/o.npy");
  try {
    write_npy(file, patterned(DType::fp32, 1, 1, 1, 1));
    FAIL() << "no error";
  } catch (const std::runtime_error& error) {
    EXPECT_NE(std::string(error.what()).find(file), std::string::npos) << error.what();
  }
}

// ---------------------------------------------------------------------------------------------------------
// The writer against the specification, byte by byte

TEST_F(NpyTest, HeaderLayoutFollowsTheSpec) {
  HostTensor t(DType::fp32, 2, 17, 4, 64);
  for (std::int64_t i = 0; i < t.elements(); ++i) t.set(i, 0.0f);
  t.set(0, 1.0f);
  t.set(t.elements() - 1, -2.0f);
  write_npy(path("q.npy"), t);
  const std::string bytes = read_bytes(path("q.npy"));

  ASSERT_GE(bytes.size(), 10u);
  EXPECT_EQ(bytes.substr(0, 6), std::string("\x93NUMPY"));
  EXPECT_EQ(bytes[6], '\x01') << "major version";
  EXPECT_EQ(bytes[7], '\x00') << "minor version";
  const std::size_t header_len = std::size_t(std::uint8_t(bytes[8])) | std::size_t(std::uint8_t(bytes[9])) << 8;
  EXPECT_EQ((10 + header_len) % 64, 0u) << "data must start at a multiple of 64 bytes";
  ASSERT_EQ(bytes.size(), 10 + header_len + std::size_t(t.elements()) * 4);

  const std::string header = bytes.substr(10, header_len);
  const std::string dict = "{'descr': '<f4', 'fortran_order': False, 'shape': (2, 17, 4, 64), }";
  EXPECT_EQ(header.substr(0, dict.size()), dict);
  EXPECT_EQ(header.back(), '\n');
  EXPECT_EQ(header.find_first_not_of(' ', dict.size()), header_len - 1) << "padding must be spaces";

  const std::string data = bytes.substr(10 + header_len);
  EXPECT_EQ(data.substr(0, 4), std::string("\x00\x00\x80\x3f", 4)) << "1.0f little-endian";
  EXPECT_EQ(data.substr(data.size() - 4), std::string("\x00\x00\x00\xc0", 4)) << "-2.0f little-endian";
}

TEST_F(NpyTest, DescrAndDataPerDtype) {
  struct Expect {
    DType dtype;
    std::string descr;
    std::string one;  // the bytes of 1.0
  };
  for (const Expect& e : {Expect{DType::fp16, "<f2", std::string("\x00\x3c", 2)},
                          Expect{DType::bf16, "<f4", std::string("\x00\x00\x80\x3f", 4)}}) {
    HostTensor t(e.dtype, 1, 3, 1, 1);
    t.set(0, 1.0f);
    t.set(1, 1.0f);
    t.set(2, 1.0f);
    write_npy(path("t.npy"), t);
    const std::string bytes = read_bytes(path("t.npy"));
    const std::size_t header_len = std::size_t(std::uint8_t(bytes[8])) | std::size_t(std::uint8_t(bytes[9])) << 8;
    const std::string dict = "{'descr': '" + e.descr + "', 'fortran_order': False, 'shape': (1, 3, 1, 1), }";
    EXPECT_EQ(bytes.substr(10, dict.size()), dict) << to_string(e.dtype);
    EXPECT_EQ((10 + header_len) % 64, 0u);
    EXPECT_EQ(bytes.size(), 10 + header_len + 3 * e.one.size());
    EXPECT_EQ(bytes.substr(10 + header_len), e.one + e.one + e.one) << to_string(e.dtype);
  }
}

TEST_F(NpyTest, ReadsHandBuiltFilesInEveryHeaderStyle) {
  const std::string data = f32_bytes({1.0f, -2.0f, 0.25f, 3.5f, -0.0f, 100.0f});
  struct Style {
    const char* what;
    std::string bytes;
  };
  const Style styles[] = {
      {"numpy >= 1.9, version 1.0", hand_built(dict_f4("(1, 2, 3, 1)"), data)},
      {"old numpy: 16-byte alignment, Python 2 longs",
       hand_built("{'descr': '<f4', 'fortran_order': False, 'shape': (1L, 2L, 3L, 1L), }", data, 1, 16)},
      {"other key order, double quotes, no trailing comma",
       hand_built("{\"shape\": (1,2,3,1), \"fortran_order\": False, \"descr\": \"<f4\"}", data)},
      {"no padding and no newline", hand_built(dict_f4("(1, 2, 3, 1)"), data, 1, 64, false)},
      {"version 2.0, uint32 header length", hand_built(dict_f4("(1, 2, 3, 1)"), data, 2)},
      {"version 3.0 (utf-8 header)", hand_built(dict_f4("(1, 2, 3, 1)"), data, 3)},
  };
  for (const Style& style : styles) {
    SCOPED_TRACE(style.what);
    write_bytes(path("hand.npy"), style.bytes);
    const HostTensor t = read_npy(path("hand.npy"), "--q");
    EXPECT_EQ(t.dtype(), DType::fp32);
    EXPECT_EQ(shape_of(t), (std::vector<std::int64_t>{1, 2, 3, 1}));
    const float expected[] = {1.0f, -2.0f, 0.25f, 3.5f, -0.0f, 100.0f};
    for (int i = 0; i < 6; ++i) EXPECT_EQ(t.get(i), expected[i]) << i;
    EXPECT_TRUE(std::signbit(t.get(4)));
  }

  // '<f2': 1.0, -2.0 as fp16 bits.
  write_bytes(path("half.npy"), hand_built("{'descr': '<f2', 'fortran_order': False, 'shape': (1, 1, 1, 2), }",
                                           std::string("\x00\x3c\x00\xc0", 4)));
  const HostTensor h = read_npy(path("half.npy"), "--k");
  EXPECT_EQ(h.dtype(), DType::fp16);
  EXPECT_EQ(h.get(0), 1.0f);
  EXPECT_EQ(h.get(1), -2.0f);
}

// ---------------------------------------------------------------------------------------------------------
// Interoperability with NumPy itself

// Runs `script` with the given arguments; true when it exits 0. Its output goes to the test's output.
bool run_python(const std::string& python, const std::string& script_path, const std::string& script,
                const std::string& argument) {
  write_bytes(script_path, script);
  return std::system(("'" + python + "' '" + script_path + "' '" + argument + "'").c_str()) == 0;
}

TEST_F(NpyTest, NumpyLoadsWhatFaprobeWrites) {
  const std::string python = python_with_numpy();
  if (python.empty()) GTEST_SKIP() << "no python3 with numpy (Debian: apt-get install python3-numpy)";
  write_npy(path("f32.npy"), patterned(DType::fp32, 2, 17, 4, 64));
  write_npy(path("f16.npy"), patterned(DType::fp16, 1, 3, 5, 7));
  write_npy(path("bf16.npy"), patterned(DType::bf16, 3, 1, 2, 8));
  const std::string script = R"(
import os, sys, numpy
d = sys.argv[1]
def check(name, dtype, shape):
    a = numpy.load(os.path.join(d, name))
    assert a.dtype == numpy.dtype(dtype), (name, a.dtype)
    assert a.shape == shape, (name, a.shape)
    assert a.flags['C_CONTIGUOUS']
    expected = ((numpy.arange(a.size) % 97) * 0.25 - 12.0).astype(dtype).reshape(shape)
    assert numpy.array_equal(a, expected), name
    with open(os.path.join(d, name), 'rb') as f:
        assert numpy.lib.format.read_magic(f) == (1, 0)
check('f32.npy', '<f4', (2, 17, 4, 64))
check('f16.npy', '<f2', (1, 3, 5, 7))
check('bf16.npy', '<f4', (3, 1, 2, 8))
)";
  EXPECT_TRUE(run_python(python, path("load.py"), script, directory_.string()));
}

TEST_F(NpyTest, FaprobeReadsWhatNumpyWrites) {
  const std::string python = python_with_numpy();
  if (python.empty()) GTEST_SKIP() << "no python3 with numpy (Debian: apt-get install python3-numpy)";
  const std::string script = R"(
import os, sys, numpy
d = sys.argv[1]
def pattern(shape, dtype):
    return ((numpy.arange(numpy.prod(shape)) % 97) * 0.25 - 12.0).astype(dtype).reshape(shape)
numpy.save(os.path.join(d, 'f32.npy'), pattern((2, 5, 3, 16), '<f4'))
numpy.save(os.path.join(d, 'f16.npy'), pattern((1, 9, 2, 8), '<f2'))
with open(os.path.join(d, 'v2.npy'), 'wb') as f:
    numpy.lib.format.write_array(f, pattern((1, 2, 1, 4), '<f4'), version=(2, 0))
numpy.save(os.path.join(d, 'f64.npy'), pattern((1, 2, 1, 4), '<f8'))
numpy.save(os.path.join(d, 'big.npy'), pattern((1, 2, 1, 4), '>f4'))
numpy.save(os.path.join(d, 'flat.npy'), pattern((3, 4), '<f4'))
numpy.save(os.path.join(d, 'fortran.npy'), numpy.asfortranarray(pattern((2, 3, 4, 5), '<f4')))
numpy.save(os.path.join(d, 'empty.npy'), numpy.zeros((1, 0, 2, 4), '<f4'))
numpy.save(os.path.join(d, 'struct.npy'), numpy.zeros((1, 2, 1, 4), dtype=[('x', '<f4')]))
)";
  ASSERT_TRUE(run_python(python, path("save.py"), script, directory_.string()));

  auto expect_pattern = [](const HostTensor& t) {
    for (std::int64_t i = 0; i < t.elements(); ++i) ASSERT_EQ(t.get(i), float(i % 97) * 0.25f - 12.0f) << i;
  };
  const HostTensor f32 = read_npy(path("f32.npy"), "--q");
  EXPECT_EQ(f32.dtype(), DType::fp32);
  EXPECT_EQ(shape_of(f32), (std::vector<std::int64_t>{2, 5, 3, 16}));
  expect_pattern(f32);
  const HostTensor f16 = read_npy(path("f16.npy"), "--k");
  EXPECT_EQ(f16.dtype(), DType::fp16);
  EXPECT_EQ(shape_of(f16), (std::vector<std::int64_t>{1, 9, 2, 8}));
  expect_pattern(f16);
  expect_pattern(read_npy(path("v2.npy"), "--v"));

  const HostTensor f64 = read_npy(path("f64.npy"), "--q");  // float64, as NumPy users keep a reference
  EXPECT_EQ(f64.dtype(), DType::fp32);
  EXPECT_EQ(shape_of(f64), (std::vector<std::int64_t>{1, 2, 1, 4}));
  expect_pattern(f64);
  EXPECT_NE(error_of(path("big.npy"), "--q").find("dtype '>f4' is not supported"), std::string::npos);
  EXPECT_EQ(error_of(path("flat.npy"), "--k"),
            "--k " + path("flat.npy") + ": expected a 4-D array (batch, seq, heads, head_dim), got shape (3, 4)");
  EXPECT_NE(error_of(path("fortran.npy"), "--o").find("fortran_order arrays are not supported"), std::string::npos);
  EXPECT_NE(error_of(path("empty.npy"), "--v").find("zero dimension"), std::string::npos);
  EXPECT_NE(error_of(path("struct.npy"), "--v").find("structured dtypes are not supported"), std::string::npos);
}

// ---------------------------------------------------------------------------------------------------------
// Malformed files: a UsageError naming the flag, the file and the reason; never a crash

TEST_F(NpyTest, MissingFileOrDirectory) {
  EXPECT_NE(error_of(path("absent.npy"), "--q").find("cannot open the file"), std::string::npos);
  EXPECT_NE(error_of(directory_.string(), "--k").find("not a regular file"), std::string::npos);
}

TEST_F(NpyTest, BadMagic) {
  const std::string data = f32_bytes({1.0f});
  std::string wrong = hand_built(dict_f4("(1, 1, 1, 1)"), data);
  wrong[1] = 'n';
  EXPECT_NE(read_error(wrong, "--v").find("not a .npy file (bad magic)"), std::string::npos);
  EXPECT_NE(read_error("", "--v").find("not a .npy file (bad magic)"), std::string::npos);
  EXPECT_NE(read_error("\x93NUM", "--v").find("not a .npy file (bad magic)"), std::string::npos);
  EXPECT_NE(read_error("a,b,c\n1,2,3\n", "--v").find("not a .npy file (bad magic)"), std::string::npos);
}

TEST_F(NpyTest, UnsupportedVersion) {
  std::string file = hand_built(dict_f4("(1, 1, 1, 1)"), f32_bytes({1.0f}));
  file[6] = '\x04';
  EXPECT_NE(read_error(file).find("unsupported .npy format version 4.0 (allowed: 1.0, 2.0, 3.0)"), std::string::npos);
  file[6] = '\x01';
  file[7] = '\x01';
  EXPECT_NE(read_error(file).find("version 1.1"), std::string::npos);
}

TEST_F(NpyTest, HeaderLengthIsChecked) {
  const std::string file = hand_built(dict_f4("(1, 1, 1, 1)"), "").substr(0, 64);
  EXPECT_NE(read_error(file).find("file is truncated (expected a header of 118 bytes, found 54)"), std::string::npos);
  std::string v2 = hand_built(dict_f4("(1, 1, 1, 1)"), f32_bytes({1.0f}), 2);
  v2.replace(8, 4, le32(0xffffffffu));
  EXPECT_NE(read_error(v2).find("header length 4294967295 is implausible"), std::string::npos);
  EXPECT_NE(read_error(std::string("\x93NUMPY\x02\x00\x10", 9)).find("bad magic"), std::string::npos);
  EXPECT_NE(read_error(std::string("\x93NUMPY\x02\x00\x10\x00", 10)).find("truncated"), std::string::npos);
}

TEST_F(NpyTest, MalformedHeaderDicts) {
  const std::string data = f32_bytes({1.0f});
  struct Bad {
    std::string dict;
    std::string reason;
  };
  const Bad cases[] = {
      {"", "does not start with '{'"},
      {"descr: <f4", "does not start with '{'"},
      {"{'descr': '<f4', 'fortran_order': False, 'shape': (1, 1, 1, 1), ", "unexpected end of header"},
      {"{'descr': '<f4' 'fortran_order': False, 'shape': (1, 1, 1, 1)}", "expected ',' or '}'"},
      {"{'descr' '<f4', 'fortran_order': False, 'shape': (1, 1, 1, 1)}", "expected ':'"},
      {"{'descr': '<f4, 'fortran_order': False, 'shape': (1, 1, 1, 1)}", "malformed header dict"},
      {"{'descr': '<f4', 'fortran_order': False, 'shape': (1, 1, 1, 1)} extra", "unexpected text after"},
      {"{'descr': '<f4', 'fortran_order': false, 'shape': (1, 1, 1, 1)}", "unexpected name 'false'"},
      {"{'descr': '<f4', 'fortran_order': 0, 'shape': (1, 1, 1, 1)}", "'fortran_order' is not True or False"},
      {"{'descr': '<f4', 'fortran_order': False, 'shape': [1, 1, 1, 1]}", "'shape' is not a tuple"},
      {"{'descr': '<f4', 'fortran_order': False, 'shape': (1, 1, 'a', 1)}", "'shape' holds a non-integer"},
      {"{'descr': '<f4', 'fortran_order': False}", "no 'shape' key"},
      {"{'fortran_order': False, 'shape': (1, 1, 1, 1)}", "no 'descr' key"},
      {"{'descr': '<f4', 'fortran_order': False, 'shape': (1, 1, 1, 1), 'x': 1}", "unexpected key 'x'"},
      {"{'descr': '<f4', 'descr': '<f4', 'fortran_order': False, 'shape': (1, 1, 1, 1)}", "duplicate key 'descr'"},
      {"{1: '<f4'}", "a key is not a string"},
      {"{'descr': '<f4', 'fortran_order': False, 'shape': " + std::string(100, '(') + "1" + std::string(100, ')') +
           "}",
       "nested too deeply"},
      {"{'descr': '<f4', 'fortran_order': False, 'shape': (1, 1, 1, 99999999999999999999)}", "integer out of range"},
      {"{'descr': '<f4', 'fortran_order': False, 'shape': (1, 1, 1, -)}", "expected a digit"},
      {"{'descr': '<f4', 'fortran_order': False, 'shape': \x01}", "unexpected character '?'"},
  };
  for (const Bad& bad : cases) {
    SCOPED_TRACE(bad.dict);
    const std::string message = read_error(hand_built(bad.dict, data), "--o");
    EXPECT_NE(message.find(bad.reason), std::string::npos) << message;
  }
}

// float64, what NumPy users keep a reference in: each value rounded to the nearest float32.
TEST_F(NpyTest, Float64IsReadAsTheNearestFloat32) {
  const double values[] = {1.0 / 3.0, -2.5, 1e-300, 6e38};
  std::string data(sizeof(values), '\0');
  std::memcpy(data.data(), values, sizeof(values));
  const std::string file = path("f64.npy");
  write_bytes(file, hand_built("{'descr': '<f8', 'fortran_order': False, 'shape': (1, 2, 1, 2), }", data));
  bool narrowed = false;
  const HostTensor t = read_npy(file, "--o", &narrowed);
  EXPECT_TRUE(narrowed);
  EXPECT_EQ(t.dtype(), DType::fp32);
  EXPECT_EQ(shape_of(t), (std::vector<std::int64_t>{1, 2, 1, 2}));
  EXPECT_EQ(t.get(0), float(1.0 / 3.0));
  EXPECT_EQ(t.get(1), -2.5f);
  EXPECT_EQ(t.get(2), 0.0f);
  EXPECT_TRUE(std::isinf(t.get(3)));  // beyond float32: Inf, which verify then reports as not finite
  // Short data is refused as for float32.
  write_bytes(file, hand_built("{'descr': '<f8', 'fortran_order': False, 'shape': (1, 2, 1, 2), }", data.substr(8)));
  EXPECT_THROW(read_npy(file, "--o"), UsageError);
  write_bytes(file, hand_built("{'descr': '<f4', 'fortran_order': False, 'shape': (1, 1, 1, 1), }", std::string(4, '\0')));
  read_npy(file, "--o", &narrowed);
  EXPECT_FALSE(narrowed);
}

TEST_F(NpyTest, UnsupportedDtypeMessage) {
  const std::string file = path("q.npy");
  write_bytes(file, hand_built("{'descr': '<i8', 'fortran_order': False, 'shape': (1, 1, 1, 1), }",
                               std::string(8, '\0')));
  EXPECT_EQ(error_of(file, "--q"), "--q " + file +
                                       ": dtype '<i8' is not supported (allowed: float32 '<f4', float16 '<f2', "
                                       "float64 '<f8')");
  write_bytes(file, hand_built("{'descr': [('x', '<f4')], 'fortran_order': False, 'shape': (1, 1, 1, 1), }",
                               std::string(4, '\0')));
  EXPECT_NE(error_of(file, "--q").find("structured dtypes are not supported"), std::string::npos);
  // A descr full of control characters is quoted on one line, shortened.
  write_bytes(file, hand_built("{'descr': '\x01\t" + std::string(200, 'x') + "', 'fortran_order': False, "
                               "'shape': (1, 1, 1, 1), }", std::string(4, '\0')));
  EXPECT_NE(error_of(file, "--q").find("dtype '??xxx"), std::string::npos);
}

TEST_F(NpyTest, ShapeMessages) {
  const std::string k = path("k.npy");
  write_bytes(k, hand_built(dict_f4("(3, 4)"), std::string(48, '\0')));
  EXPECT_EQ(error_of(k, "--k"),
            "--k " + k + ": expected a 4-D array (batch, seq, heads, head_dim), got shape (3, 4)");
  write_bytes(k, hand_built(dict_f4("(12,)"), std::string(48, '\0')));
  EXPECT_NE(error_of(k, "--k").find("got shape (12,)"), std::string::npos);
  write_bytes(k, hand_built(dict_f4("()"), std::string(4, '\0')));
  EXPECT_NE(error_of(k, "--k").find("got shape ()"), std::string::npos);

  EXPECT_NE(read_error(hand_built(dict_f4("(1, 0, 1, 1)"), "")).find("shape (1, 0, 1, 1) has a zero dimension"),
            std::string::npos);
  EXPECT_NE(read_error(hand_built(dict_f4("(1, -4, 1, 1)"), "")).find("has a negative dimension"), std::string::npos);
  // Each dimension fits in an int64, their product in bytes does not.
  EXPECT_NE(read_error(hand_built(dict_f4("(4294967296, 4294967296, 1, 1)"), "")).find("is too large"),
            std::string::npos);
  EXPECT_NE(read_error(hand_built(dict_f4("(2305843009213693952, 1, 1, 1)"), "")).find("is too large"),
            std::string::npos);
}

TEST_F(NpyTest, FortranOrderMessage) {
  const std::string o = path("o.npy");
  write_bytes(o, hand_built("{'descr': '<f4', 'fortran_order': True, 'shape': (1, 1, 1, 2), }", f32_bytes({1, 2})));
  EXPECT_EQ(error_of(o, "--o").rfind("--o " + o + ": fortran_order arrays are not supported", 0), 0u);
}

TEST_F(NpyTest, DataSizeMustMatchTheShape) {
  const std::string q = path("q.npy");
  write_bytes(q, hand_built(dict_f4("(1, 2, 3, 4)"), std::string(90, '\0')));
  EXPECT_EQ(error_of(q, "--q"), "--q " + q + ": file is truncated (expected 96 bytes of data, found 90)");
  // A huge shape over a tiny file is refused before anything is allocated.
  write_bytes(q, hand_built(dict_f4("(65536, 65536, 64, 128)"), std::string(16, '\0')));
  EXPECT_NE(error_of(q, "--q").find("file is truncated (expected 140737488355328 bytes of data, found 16)"),
            std::string::npos);
  write_bytes(q, hand_built(dict_f4("(1, 2, 3, 4)"), std::string(100, '\0')));
  EXPECT_NE(error_of(q, "--q").find("trailing data"), std::string::npos);
}

TEST_F(NpyTest, EveryTruncationOfAValidFileIsRejected) {
  write_npy(path("full.npy"), patterned(DType::fp16, 1, 2, 3, 4));
  const std::string full = read_bytes(path("full.npy"));
  for (std::size_t length = 0; length < full.size(); ++length) {
    SCOPED_TRACE(length);
    write_bytes(path("cut.npy"), full.substr(0, length));
    EXPECT_THROW(read_npy(path("cut.npy"), "--q"), UsageError);
  }
}

// Random corruption of a valid file: every outcome is a tensor or a UsageError, never a crash or another
// exception. Mostly hits the header, where the parser lives.
TEST_F(NpyTest, RandomCorruptionNeverCrashes) {
  write_npy(path("good.npy"), patterned(DType::fp32, 1, 2, 2, 4));
  const std::string good = read_bytes(path("good.npy"));
  std::mt19937 rng(2024);
  const std::string alphabet = "{}()[]'\":, \n0123456789-LTrueFalsNn<>f248\x93\\";
  int accepted = 0;
  for (int trial = 0; trial < 2000; ++trial) {
    std::string bytes = good;
    const int edits = 1 + int(rng() % 4);
    for (int e = 0; e < edits; ++e) {
      const std::size_t at = rng() % 4 != 0 ? rng() % 128 : rng() % bytes.size();
      bytes[at] = rng() % 2 != 0 ? alphabet[rng() % alphabet.size()] : static_cast<char>(rng() & 0xff);
    }
    if (rng() % 8 == 0) bytes.resize(rng() % bytes.size());
    write_bytes(path("fuzz.npy"), bytes);
    try {
      read_npy(path("fuzz.npy"), "--q");
      ++accepted;
    } catch (const UsageError&) {
    }
  }
  EXPECT_LT(accepted, 2000);  // and no crash, no other exception
}

// ---------------------------------------------------------------------------------------------------------
// check_attention_shapes

std::string shape_message(const HostTensor& q, const HostTensor& k, const HostTensor& v, const HostTensor& o) {
  try {
    check_attention_shapes(q, k, v, o);
  } catch (const UsageError& error) {
    return error.what();
  }
  return "";
}

TEST(CheckAttentionShapes, AcceptsMhaGqaMqaAndMixedDtypes) {
  const DType f = DType::fp32;
  for (std::int64_t kv_heads : {8, 2, 1}) {
    HostTensor q(DType::fp16, 2, 5, 8, 64), k(DType::fp16, 2, 33, kv_heads, 64), v(DType::fp16, 2, 33, kv_heads, 64);
    EXPECT_NO_THROW(check_attention_shapes(q, k, v, HostTensor(f, 2, 5, 8, 64))) << kv_heads;
  }
}

TEST(CheckAttentionShapes, NamesTheFlagsAndBothShapes) {
  const DType f = DType::fp32;
  const HostTensor q(f, 2, 5, 8, 64), k(f, 2, 7, 4, 64), o(f, 2, 5, 8, 64);
  struct Bad {
    HostTensor q, k, v, o;
    std::vector<std::string> parts;
  };
  Bad cases[] = {
      {HostTensor(f, 2, 5, 8, 64), HostTensor(f, 2, 7, 4, 64), HostTensor(f, 2, 6, 4, 64), HostTensor(f, 2, 5, 8, 64),
       {"--k (2, 7, 4, 64)", "--v (2, 6, 4, 64)", "same shape"}},
      {HostTensor(f, 2, 5, 8, 64), HostTensor(f, 2, 7, 4, 64), HostTensor(f, 2, 7, 4, 64), HostTensor(f, 2, 4, 8, 64),
       {"--o (2, 4, 8, 64)", "--q (2, 5, 8, 64)"}},
      {HostTensor(f, 3, 5, 8, 64), HostTensor(f, 2, 7, 4, 64), HostTensor(f, 2, 7, 4, 64), HostTensor(f, 3, 5, 8, 64),
       {"--q (3, 5, 8, 64)", "--k/--v (2, 7, 4, 64)", "batch (3 vs 2)"}},
      {HostTensor(f, 2, 5, 8, 64), HostTensor(f, 2, 7, 4, 32), HostTensor(f, 2, 7, 4, 32), HostTensor(f, 2, 5, 8, 64),
       {"--q (2, 5, 8, 64)", "--k/--v (2, 7, 4, 32)", "head_dim (64 vs 32)"}},
      {HostTensor(f, 2, 5, 6, 64), HostTensor(f, 2, 7, 4, 64), HostTensor(f, 2, 7, 4, 64), HostTensor(f, 2, 5, 6, 64),
       {"--q (2, 5, 6, 64)", "--k/--v (2, 7, 4, 64)", "6 heads", "4 kv heads"}},
  };
  for (const Bad& bad : cases) {
    const std::string message = shape_message(bad.q, bad.k, bad.v, bad.o);
    ASSERT_FALSE(message.empty());
    for (const std::string& part : bad.parts) EXPECT_NE(message.find(part), std::string::npos) << message;
  }
  EXPECT_TRUE(shape_message(q, k, k, o).empty());
}

}  // namespace
}  // namespace faprobe

// .npy reading and writing: round trips, the header grammar numpy writes (1.0 and 2.0),
// every refusal naming the file and the field, and files written and read by numpy itself.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <limits>
#include <string>

#include "npy.h"

namespace floe::tool {
namespace {

namespace fs = std::filesystem;

class NpyTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::path(FLOE_BINARY_DIR) / "test_tmp" /
           ::testing::UnitTest::GetInstance()->current_test_info()->name();
    fs::remove_all(dir_);
    fs::create_directories(dir_);
  }
  std::string path(const std::string& name) const { return (dir_ / name).string(); }

  // A .npy file from its parts, so that headers numpy would never write can be tried too.
  std::string raw(const std::string& name, int major, int minor, const std::string& header,
                  const std::string& data) const {
    std::string out("\x93NUMPY", 6);
    out.push_back(static_cast<char>(major));
    out.push_back(static_cast<char>(minor));
    const auto len = static_cast<uint32_t>(header.size());
    const int len_bytes = major == 1 ? 2 : 4;
    for (int i = 0; i < len_bytes; ++i) out.push_back(static_cast<char>((len >> (8 * i)) & 0xFF));
    out += header + data;
    std::ofstream(path(name), std::ios::binary) << out;
    return path(name);
  }
  static std::string floats(std::initializer_list<float> xs) {
    std::string s;
    for (float x : xs) s.append(reinterpret_cast<const char*>(&x), 4);
    return s;
  }

  fs::path dir_;
};

std::string error_of(const std::string& path) {
  Result<HostArray> r = read_npy(path);
  EXPECT_FALSE(r.ok()) << path << " was read";
  return r.ok() ? "" : r.status().message();
}

TEST_F(NpyTest, RoundTripKeepsShapeAndBits) {
  const float nan = std::numeric_limits<float>::quiet_NaN();
  const float inf = std::numeric_limits<float>::infinity();
  for (const std::vector<int64_t>& shape :
       std::vector<std::vector<int64_t>>{{}, {0}, {5}, {2, 3}, {2, 3, 4, 5}, {1, 0, 3}}) {
    HostArray a;
    a.shape = shape;
    a.data.resize(static_cast<size_t>(a.numel()));
    for (size_t i = 0; i < a.data.size(); ++i) a.data[i] = 0.5f * static_cast<float>(i) - 3.f;
    if (a.data.size() >= 4) {
      a.data[0] = nan;
      a.data[1] = -inf;
      a.data[2] = -0.0f;
      a.data[3] = 1e-42f;  // subnormal
    }
    ASSERT_TRUE(write_npy(path("a.npy"), a).ok());
    Result<HostArray> b = read_npy(path("a.npy"));
    ASSERT_TRUE(b.ok()) << b.status().message();
    EXPECT_EQ(b->shape, a.shape);
    ASSERT_EQ(b->data.size(), a.data.size());
    EXPECT_EQ(std::memcmp(b->data.data(), a.data.data(), a.data.size() * 4), 0);
    // numpy's layout: the data starts on a 64-byte boundary.
    EXPECT_EQ((fs::file_size(path("a.npy")) - a.data.size() * 4) % 64, 0u);
  }
}

TEST_F(NpyTest, WriteRefusesAShapeThatDisagreesWithTheData) {
  HostArray a;
  a.shape = {2, 2};
  a.data = {1, 2, 3};
  Status st = write_npy(path("bad.npy"), a);
  ASSERT_FALSE(st.ok());
  EXPECT_NE(st.message().find("bad.npy"), std::string::npos) << st.message();
  EXPECT_NE(st.message().find("(2, 2)"), std::string::npos) << st.message();
}

TEST_F(NpyTest, ParsesHeaderVariants) {
  // Key order, double quotes, no trailing comma, extra spaces, Python 2 long suffix.
  const std::string data = floats({1, 2, 3, 4, 5, 6});
  for (const std::string& header :
       {std::string("{'descr': '<f4', 'fortran_order': False, 'shape': (2, 3), }      \n"),
        std::string("{'shape': (2,3), 'fortran_order': False, 'descr': '<f4'}\n"),
        std::string("{\"descr\": \"<f4\", \"fortran_order\": False, \"shape\": (2, 3)}\n"),
        std::string("  {  'descr' : '<f4' ,'fortran_order':False,'shape':( 2 , 3 , ) }\n"),
        std::string("{'descr': '<f4', 'fortran_order': False, 'shape': (2L, 3L), }\n")}) {
    Result<HostArray> a = read_npy(raw("h.npy", 1, 0, header, data));
    ASSERT_TRUE(a.ok()) << header << ": " << a.status().message();
    EXPECT_EQ(a->shape, (std::vector<int64_t>{2, 3}));
    EXPECT_EQ(a->data, (std::vector<float>{1, 2, 3, 4, 5, 6}));
  }
}

TEST_F(NpyTest, ReadsVersion2Headers) {
  Result<HostArray> a =
      read_npy(raw("v2.npy", 2, 0, "{'descr': '<f4', 'fortran_order': False, 'shape': (3,), }\n",
                   floats({7, 8, 9})));
  ASSERT_TRUE(a.ok()) << a.status().message();
  EXPECT_EQ(a->shape, (std::vector<int64_t>{3}));
  EXPECT_EQ(a->data, (std::vector<float>{7, 8, 9}));
}

TEST_F(NpyTest, ScalarHasEmptyShapeAndOneValue) {
  Result<HostArray> a = read_npy(raw(
      "s.npy", 1, 0, "{'descr': '<f4', 'fortran_order': False, 'shape': (), }\n", floats({42})));
  ASSERT_TRUE(a.ok()) << a.status().message();
  EXPECT_TRUE(a->shape.empty());
  EXPECT_EQ(a->data, (std::vector<float>{42}));
}

TEST_F(NpyTest, RefusalsNameTheFileAndTheField) {
  const std::string ok_header = "{'descr': '<f4', 'fortran_order': False, 'shape': (2,), }\n";
  const std::string two = floats({1, 2});
  struct Bad {
    std::string what;
    std::string file;
    std::string needle;  // what the message must contain besides the file name
  };
  std::vector<Bad> bad = {
      {"f64",
       raw("f64.npy", 1, 0, "{'descr': '<f8', 'fortran_order': False, 'shape': (1,), }\n", two),
       "field 'descr' is '<f8', must be '<f4'"},
      {"big-endian",
       raw("be.npy", 1, 0, "{'descr': '>f4', 'fortran_order': False, 'shape': (2,), }\n", two),
       "field 'descr' is '>f4'"},
      {"fortran",
       raw("fo.npy", 1, 0, "{'descr': '<f4', 'fortran_order': True, 'shape': (2,), }\n", two),
       "field 'fortran_order' is True"},
      {"no shape", raw("ns.npy", 1, 0, "{'descr': '<f4', 'fortran_order': False}\n", two),
       "field 'shape' missing"},
      {"no descr", raw("nd.npy", 1, 0, "{'fortran_order': False, 'shape': (2,)}\n", two),
       "field 'descr' missing"},
      {"shape list",
       raw("sl.npy", 1, 0, "{'descr': '<f4', 'fortran_order': False, 'shape': [2]}\n", two),
       "'shape'"},
      {"unknown field",
       raw("uf.npy", 1, 0, "{'descr': '<f4', 'fortran_order': False, 'shape': (2,), 'x': True}\n",
           two),
       "unknown field 'x'"},
      {"structured",
       raw("st.npy", 1, 0, "{'descr': [('a', '<f4')], 'fortran_order': False, 'shape': (2,)}\n",
           two),
       "'descr'"},
      {"negative dim",
       raw("neg.npy", 1, 0, "{'descr': '<f4', 'fortran_order': False, 'shape': (-2,)}\n", two),
       "'shape'"},
      {"truncated data", raw("td.npy", 1, 0, ok_header, floats({1})), "data: 4 bytes"},
      {"extra data", raw("xd.npy", 1, 0, ok_header, floats({1, 2, 3})), "data: more than 8 bytes"},
      {"version 3", raw("v3.npy", 3, 0, ok_header, two), "version: 3.0"},
      {"truncated header", raw("th.npy", 1, 0, "{'descr'", ""), "header"},
  };
  {
    std::ofstream(path("magic.npy"), std::ios::binary) << "PK\x03\x04 not numpy";
    bad.push_back({"magic", path("magic.npy"), "magic"});
  }
  {
    // Header length says more than the file holds.
    std::string s("\x93NUMPY\x01\x00\xff\x00{", 11);
    std::ofstream(path("short.npy"), std::ios::binary) << s;
    bad.push_back({"header past the end", path("short.npy"), "truncated"});
  }
  bad.push_back({"missing file", path("nope.npy"), "cannot open"});
  for (const Bad& b : bad) {
    const std::string msg = error_of(b.file);
    EXPECT_NE(msg.find(b.file), std::string::npos) << b.what << ": " << msg;
    EXPECT_NE(msg.find(b.needle), std::string::npos) << b.what << ": " << msg;
  }
}

// An endless stream: a valid header, then bytes for ever. Counts what was read from it.
class EndlessBuf : public std::streambuf {
 public:
  explicit EndlessBuf(std::string head) : head_(std::move(head)) {}
  size_t consumed() const { return consumed_; }

 protected:
  int_type underflow() override {
    // Serves the header, then zeros, a chunk at a time.
    if (pos_ < head_.size()) {
      chunk_.assign(head_.begin() + static_cast<std::ptrdiff_t>(pos_), head_.end());
      pos_ = head_.size();
    } else {
      chunk_.assign(4096, '\0');
    }
    consumed_ += chunk_.size();
    setg(chunk_.data(), chunk_.data(), chunk_.data() + chunk_.size());
    return traits_type::to_int_type(chunk_[0]);
  }

 private:
  std::string head_;
  std::string chunk_;
  size_t pos_ = 0;
  size_t consumed_ = 0;
};

// Issue 11 item 2: no .npy may abort floe or read without bound. Each of these used to crash,
// hang or read until memory ran out (the whole file was read before the header was looked at).
TEST_F(NpyTest, ReadsAreBoundedByTheHeaderAndNeverAbort) {
  // A directory named like a .npy.
  fs::create_directories(dir_ / "dir.npy");
  EXPECT_NE(error_of(path("dir.npy")).find("is a directory"), std::string::npos);
  // Endless devices: refused at the magic, after a few bytes.
  for (const char* dev : {"/dev/zero", "/dev/urandom"}) {
    if (!fs::exists(dev)) continue;
    fs::create_symlink(dev, dir_ / (std::string(dev + 5) + ".npy"));
    EXPECT_NE(error_of(path(std::string(dev + 5) + ".npy")).find("magic"), std::string::npos)
        << dev;
  }
  // An endless stream behind a valid header: the read stops one byte past the declared data.
  std::string header = "{'descr': '<f4', 'fortran_order': False, 'shape': (4,), }";
  header.resize(128 - 10 - 1, ' ');  // the preamble padded to 128 bytes, as numpy does
  header += '\n';
  std::string head("\x93NUMPY\x01\x00", 8);
  head.push_back(static_cast<char>(header.size()));
  head.push_back(0);
  head += header;
  EndlessBuf buf(head);
  std::istream endless(&buf);
  Result<HostArray> r = read_npy(endless, "endless.npy");
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("data: more than 16 bytes"), std::string::npos)
      << r.status().message();
  EXPECT_LE(buf.consumed(), head.size() + 2 * 4096) << "read past the declared size";
  // A header that claims 2^40 floats over 8 bytes of data: refused without the allocation.
  const std::string huge_header =
      "{'descr': '<f4', 'fortran_order': False, 'shape': (1048576, 1048576), }\n";
  EXPECT_NE(error_of(raw("huge.npy", 1, 0, huge_header, floats({1, 2}))).find("data: 8 bytes"),
            std::string::npos);
  // A shape whose element count overflows 64 bits.
  const std::string overflow_header =
      "{'descr': '<f4', 'fortran_order': False, 'shape': (4294967296, 4294967296), }\n";
  EXPECT_NE(error_of(raw("ovf.npy", 1, 0, overflow_header, "")).find("too large"),
            std::string::npos);
  // A version 2.0 header length of 4 GiB: refused before it is read.
  std::string big("\x93NUMPY\x02\x00\xff\xff\xff\xff{", 13);
  std::ofstream(path("biglen.npy"), std::ios::binary) << big;
  EXPECT_NE(error_of(path("biglen.npy")).find("more than"), std::string::npos);
}

// numpy itself, where it is importable: files it writes read back the same, files we write it
// reads, and what it writes that we refuse (float64, Fortran order) is refused by name.
TEST_F(NpyTest, AgreesWithNumpy) {
  const std::string python = "PYTHONPATH=" + std::string(FLOE_SOURCE_DIR) + "/.deps/python python3";
  if (std::system((python + " -c 'import numpy' >/dev/null 2>&1").c_str()) != 0) {
    GTEST_SKIP() << "numpy is not importable; run scripts/setup.sh";
  }
  HostArray ours;
  ours.shape = {2, 3, 4};
  for (int i = 0; i < 24; ++i) ours.data.push_back(0.25f * static_cast<float>(i) - 1.f);
  ASSERT_TRUE(write_npy(path("ours.npy"), ours).ok());

  const std::string script = path("check.py");
  std::ofstream(script)
      << "import numpy as np, sys\n"
         "d = sys.argv[1]\n"
         "a = np.load(d + '/ours.npy')\n"
         "assert a.dtype == np.float32 and a.shape == (2, 3, 4), (a.dtype, a.shape)\n"
         "assert (a.ravel() == np.arange(24, dtype=np.float32) * 0.25 - 1).all()\n"
         "x = np.arange(60, dtype=np.float32).reshape(3, 4, 5) / 7\n"
         "np.save(d + '/theirs.npy', x)\n"
         "np.save(d + '/theirs_t.npy', np.ascontiguousarray(x.transpose(2, 0, 1)))\n"
         "np.save(d + '/scalar.npy', np.float32(3.5))\n"
         "np.save(d + '/f64.npy', x.astype(np.float64))\n"
         "np.save(d + '/fortran.npy', np.asfortranarray(x))\n"
         "np.lib.format.write_array(open(d + '/v2.npy', 'wb'), x, version=(2, 0))\n";
  ASSERT_EQ(std::system((python + " " + script + " " + dir_.string()).c_str()), 0);

  for (const char* name : {"theirs.npy", "v2.npy"}) {
    Result<HostArray> a = read_npy(path(name));
    ASSERT_TRUE(a.ok()) << a.status().message();
    EXPECT_EQ(a->shape, (std::vector<int64_t>{3, 4, 5}));
    for (int i = 0; i < 60; ++i) EXPECT_EQ(a->data[i], static_cast<float>(i) / 7.f) << name << i;
  }
  Result<HostArray> t = read_npy(path("theirs_t.npy"));
  ASSERT_TRUE(t.ok()) << t.status().message();
  EXPECT_EQ(t->shape, (std::vector<int64_t>{5, 3, 4}));
  EXPECT_EQ(t->data[1], 5.f / 7.f);  // [0, 0, 1] of the transpose is x[0, 1, 0]
  Result<HostArray> s = read_npy(path("scalar.npy"));
  ASSERT_TRUE(s.ok()) << s.status().message();
  EXPECT_TRUE(s->shape.empty());
  EXPECT_EQ(s->data, (std::vector<float>{3.5f}));
  EXPECT_NE(error_of(path("f64.npy")).find("field 'descr' is '<f8'"), std::string::npos);
  EXPECT_NE(error_of(path("fortran.npy")).find("field 'fortran_order' is True"), std::string::npos);
}

}  // namespace
}  // namespace floe::tool

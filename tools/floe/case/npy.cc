#include "npy.h"

#include <algorithm>
#include <cctype>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <limits>
#include <map>
#include <sstream>

namespace floe::tool {

namespace {

// "\x93NUMPY": the magic string every .npy file starts with.
constexpr char kMagic[] = "\x93NUMPY";
constexpr size_t kMagicBytes = 6;
// numpy pads the preamble (magic, version, length, header) to a multiple of 64 bytes so that
// the data can be memory-mapped aligned; we write the same.
constexpr size_t kPreambleAlign = 64;
constexpr size_t kMaxHeaderBytes = size_t{1} << 20;

Status npy_error(const std::string& path, const std::string& what) {
  return Status(Code::invalid_argument, path + ": " + what);
}

// The header is a Python dict literal written by numpy, e.g.
//   {'descr': '<f4', 'fortran_order': False, 'shape': (2, 3), }
// A full Python parser is not needed: keys are strings, values are a string, a bool or a
// tuple of non-negative ints. Anything else is refused.
class HeaderParser {
 public:
  HeaderParser(const std::string& text, const std::string& path) : s_(text), path_(path) {}

  struct Value {
    enum class Kind { string, boolean, tuple } kind = Kind::string;
    std::string str;
    bool boolean = false;
    std::vector<int64_t> tuple;
  };

  Status parse(std::map<std::string, Value>* out) {
    skip_space();
    if (!eat('{')) return fail("expected '{' to open the dict");
    while (true) {
      skip_space();
      if (eat('}')) break;
      std::string key;
      if (Status st = parse_string(&key); !st) return st;
      skip_space();
      if (!eat(':')) return fail("expected ':' after key '" + key + "'");
      skip_space();
      Value value;
      if (Status st = parse_value(key, &value); !st) return st;
      if (out->count(key)) return fail("key '" + key + "' appears twice");
      (*out)[key] = std::move(value);
      skip_space();
      if (eat(',')) continue;
      skip_space();
      if (eat('}')) break;
      return fail("expected ',' or '}' after the value of '" + key + "'");
    }
    skip_space();
    if (pos_ != s_.size()) return fail("unexpected text after the dict");
    return Status();
  }

 private:
  Status fail(const std::string& what) const {
    return npy_error(path_, "header: " + what + " (at character " + std::to_string(pos_) +
                                " of \"" + s_ + "\")");
  }
  void skip_space() {
    while (pos_ < s_.size() && std::isspace(static_cast<unsigned char>(s_[pos_]))) ++pos_;
  }
  bool eat(char c) {
    if (pos_ < s_.size() && s_[pos_] == c) {
      ++pos_;
      return true;
    }
    return false;
  }
  bool eat_word(const char* w) {
    const size_t n = std::strlen(w);
    if (s_.compare(pos_, n, w) == 0) {
      pos_ += n;
      return true;
    }
    return false;
  }

  Status parse_string(std::string* out) {
    if (pos_ >= s_.size() || (s_[pos_] != '\'' && s_[pos_] != '"')) {
      return fail("expected a quoted string");
    }
    const char quote = s_[pos_++];
    const size_t end = s_.find(quote, pos_);
    if (end == std::string::npos) return fail("unterminated string");
    *out = s_.substr(pos_, end - pos_);
    pos_ = end + 1;
    return Status();
  }

  Status parse_value(const std::string& key, Value* v) {
    if (pos_ < s_.size() && (s_[pos_] == '\'' || s_[pos_] == '"')) {
      v->kind = Value::Kind::string;
      return parse_string(&v->str);
    }
    if (eat_word("True")) {
      v->kind = Value::Kind::boolean;
      v->boolean = true;
      return Status();
    }
    if (eat_word("False")) {
      v->kind = Value::Kind::boolean;
      v->boolean = false;
      return Status();
    }
    if (eat('(')) {
      v->kind = Value::Kind::tuple;
      while (true) {
        skip_space();
        if (eat(')')) break;
        size_t digits = 0;
        int64_t x = 0;
        while (pos_ < s_.size() && std::isdigit(static_cast<unsigned char>(s_[pos_]))) {
          if (x > (std::numeric_limits<int64_t>::max() - 9) / 10) {
            return fail("a dim of '" + key + "' is too large");
          }
          x = x * 10 + (s_[pos_++] - '0');
          ++digits;
        }
        if (pos_ < s_.size() && s_[pos_] == 'L') ++pos_;  // Python 2 longs
        if (digits == 0) return fail("expected a non-negative integer in '" + key + "'");
        v->tuple.push_back(x);
        skip_space();
        if (eat(',')) continue;
        skip_space();
        if (eat(')')) break;
        return fail("expected ',' or ')' in '" + key + "'");
      }
      return Status();
    }
    return fail("the value of '" + key + "' is not a string, a bool or a tuple");
  }

  const std::string& s_;
  const std::string& path_;
  size_t pos_ = 0;
};

uint32_t read_le(const unsigned char* p, int bytes) {
  uint32_t v = 0;
  for (int i = bytes - 1; i >= 0; --i) v = (v << 8) | p[i];
  return v;
}

bool host_is_little_endian() {
  const uint32_t one = 1;
  unsigned char b;
  std::memcpy(&b, &one, 1);
  return b == 1;
}

// Reads up to `n` bytes; fewer only at the end of the stream. Chunked, so that what a
// header claims is never allocated before the bytes are there: a short file fails after
// reading what it has, a link to an endless one after the size the header declares.
std::string read_at_most(std::istream& in, size_t n) {
  constexpr size_t kChunk = size_t{1} << 20;
  std::string out;
  while (out.size() < n && in) {
    const size_t take = std::min(kChunk, n - out.size());
    const size_t old = out.size();
    out.resize(old + take);
    in.read(&out[old], static_cast<std::streamsize>(take));
    out.resize(old + static_cast<size_t>(in.gcount()));
  }
  return out;
}

}  // namespace

std::string shape_text(const std::vector<int64_t>& shape) {
  std::string s = "(";
  for (size_t i = 0; i < shape.size(); ++i) {
    s += std::to_string(shape[i]);
    if (i + 1 < shape.size() || shape.size() == 1) s += ",";
    if (i + 1 < shape.size()) s += " ";
  }
  return s + ")";
}

int64_t HostArray::numel() const {
  int64_t n = 1;
  for (int64_t d : shape) n *= d;
  return n;
}

Result<HostArray> read_npy(const std::string& path) {
  namespace fs = std::filesystem;
  std::error_code ec;
  if (fs::is_directory(path, ec)) return npy_error(path, "is a directory, not a .npy file");
  std::ifstream in(path, std::ios::binary);
  if (!in) return Status(Code::invalid_argument, path + ": cannot open for reading");
  return read_npy(in, path);
}

Result<HostArray> read_npy(std::istream& in, const std::string& path) {
  if (!host_is_little_endian())
    return npy_error(path, "this host is big-endian; .npy '<f4' needs little-endian");
  try {
    const std::string preamble = read_at_most(in, kMagicBytes + 2);
    if (preamble.size() < kMagicBytes + 2 || preamble.compare(0, kMagicBytes, kMagic) != 0) {
      return npy_error(path, "magic: not a .npy file (it must start with \\x93NUMPY)");
    }
    const auto* u = reinterpret_cast<const unsigned char*>(preamble.data());
    const int major = u[6];
    const int minor = u[7];
    int len_bytes = 0;
    if (major == 1 && minor == 0) {
      len_bytes = 2;
    } else if (major == 2 && minor == 0) {
      len_bytes = 4;
    } else {
      return npy_error(path, "version: " + std::to_string(major) + "." + std::to_string(minor) +
                                 ", only 1.0 and 2.0 are read");
    }
    const std::string len_field = read_at_most(in, static_cast<size_t>(len_bytes));
    if (len_field.size() < static_cast<size_t>(len_bytes)) {
      return npy_error(path, "header length: file truncated");
    }
    const size_t header_len =
        read_le(reinterpret_cast<const unsigned char*>(len_field.data()), len_bytes);
    // numpy itself refuses headers above 10000 bytes unless told otherwise; a larger one here
    // is a damaged length, not a tensor.
    if (header_len > kMaxHeaderBytes) {
      return npy_error(path, "header: " + std::to_string(header_len) + " bytes, more than the " +
                                 std::to_string(kMaxHeaderBytes) + " a .npy header may have");
    }
    const std::string header = read_at_most(in, header_len);
    if (header.size() < header_len) {
      return npy_error(path, "header: file truncated (header_len " + std::to_string(header_len) +
                                 ", only " + std::to_string(header.size()) + " bytes follow)");
    }

    std::map<std::string, HeaderParser::Value> dict;
    if (Status st = HeaderParser(header, path).parse(&dict); !st) return st;
    using Kind = HeaderParser::Value::Kind;
    for (const auto& [key, value] : dict) {
      if (key != "descr" && key != "fortran_order" && key != "shape") {
        return npy_error(path, "header: unknown field '" + key + "'");
      }
    }
    auto descr = dict.find("descr");
    if (descr == dict.end()) return npy_error(path, "header: field 'descr' missing");
    if (descr->second.kind != Kind::string || descr->second.str != "<f4") {
      const std::string got =
          descr->second.kind == Kind::string ? "'" + descr->second.str + "'" : "not a string";
      return npy_error(path,
                       "field 'descr' is " + got + ", must be '<f4' (float32, little-endian)");
    }
    auto fortran = dict.find("fortran_order");
    if (fortran == dict.end()) return npy_error(path, "header: field 'fortran_order' missing");
    if (fortran->second.kind != Kind::boolean) {
      return npy_error(path, "field 'fortran_order' must be True or False");
    }
    if (fortran->second.boolean) {
      return npy_error(path, "field 'fortran_order' is True, must be False (C order)");
    }
    auto shape = dict.find("shape");
    if (shape == dict.end()) return npy_error(path, "header: field 'shape' missing");
    if (shape->second.kind != Kind::tuple) return npy_error(path, "field 'shape' must be a tuple");

    HostArray array;
    array.shape = shape->second.tuple;
    // Guard the product against overflow before trusting it for a read.
    int64_t n = 1;
    for (int64_t d : array.shape) {
      if (d != 0 && n > std::numeric_limits<int64_t>::max() / 4 / d) {
        return npy_error(path, "field 'shape' " + shape_text(array.shape) + " is too large");
      }
      n *= d;
    }
    // The header bounds the read: one byte past the data tells a longer file from an exact one.
    const size_t want = static_cast<size_t>(n) * sizeof(float);
    const std::string data = read_at_most(in, want + 1);
    if (data.size() != want) {
      const std::string have =
          data.size() > want ? "more than " + std::to_string(want) : std::to_string(data.size());
      return npy_error(path, "data: " + have + " bytes, shape " + shape_text(array.shape) +
                                 " of float32 needs " + std::to_string(want));
    }
    array.data.resize(static_cast<size_t>(n));
    if (want > 0) std::memcpy(array.data.data(), data.data(), want);
    return array;
  } catch (const std::bad_alloc&) {
    return npy_error(path, "out of memory reading the data");
  } catch (const std::ios_base::failure& e) {
    return npy_error(path, std::string("read failed: ") + e.what());
  }
}

Status write_npy(const std::string& path, const HostArray& array) {
  if (!host_is_little_endian())
    return npy_error(path, "this host is big-endian; .npy '<f4' needs little-endian");
  if (static_cast<int64_t>(array.data.size()) != array.numel()) {
    return npy_error(path, "array holds " + std::to_string(array.data.size()) +
                               " values, its shape " + shape_text(array.shape) + " needs " +
                               std::to_string(array.numel()));
  }
  for (int64_t d : array.shape) {
    if (d < 0) return npy_error(path, "shape " + shape_text(array.shape) + " has a negative dim");
  }
  std::string dict =
      "{'descr': '<f4', 'fortran_order': False, 'shape': " + shape_text(array.shape) + ", }";
  // Version 1.0 holds a header of up to 65535 bytes; larger ones (very high ranks) need 2.0.
  int len_bytes = 2;
  size_t total = kMagicBytes + 2 + len_bytes + dict.size() + 1;
  if (total + kPreambleAlign > 65535) {
    len_bytes = 4;
    total = kMagicBytes + 2 + len_bytes + dict.size() + 1;
  }
  const size_t pad = (kPreambleAlign - total % kPreambleAlign) % kPreambleAlign;
  dict.append(pad, ' ');
  dict.push_back('\n');

  std::string out(kMagic, kMagicBytes);
  out.push_back(static_cast<char>(len_bytes == 2 ? 1 : 2));
  out.push_back(0);
  const auto header_len = static_cast<uint32_t>(dict.size());
  for (int i = 0; i < len_bytes; ++i)
    out.push_back(static_cast<char>((header_len >> (8 * i)) & 0xFF));
  out += dict;

  std::ofstream f(path, std::ios::binary | std::ios::trunc);
  if (!f) return Status(Code::invalid_argument, path + ": cannot open for writing");
  f.write(out.data(), static_cast<std::streamsize>(out.size()));
  f.write(reinterpret_cast<const char*>(array.data.data()),
          static_cast<std::streamsize>(array.data.size() * sizeof(float)));
  f.close();
  if (!f) return Status(Code::invalid_argument, path + ": write failed");
  return Status();
}

}  // namespace floe::tool

#include "case_folder.h"

#include <cuda_runtime_api.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <optional>
#include <set>
#include <stdexcept>
#include <tuple>

#include "guarded_block.h"

namespace floe::tool {

namespace fs = std::filesystem;
using nlohmann::json;

namespace {

// The tensors "strides" may name (DESIGN §4); sink, dsink and the sequence lengths are
// always packed vectors.
constexpr const char* kStrideNames[] = {"q",  "k",  "v",  "o",  "stats", "bias",
                                        "do", "dq", "dk", "dv", "dbias"};
constexpr size_t kMaxProblemJsonBytes = size_t{1} << 20;
constexpr const char* kShapeKeys[] = {"b", "h_q", "h_kv", "s_q", "s_kv", "d_qk", "d_v"};
constexpr const char* kOptionalKeys[] = {
    "strides", "scale", "softcap",       "mask",     "seq_len_q", "seq_len_kv", "bias",
    "sink",    "stats", "deterministic", "ragged_q", "ragged_kv", "paged_kv",   "split_tokens"};
// The inputs whose values sit in problem.json rather than in a .npy (DESIGN 4): integers the
// command line uploads to device arrays.
constexpr const char* kJsonInputs[] = {"seq_len_q", "seq_len_kv", "offsets_q", "offsets_kv",
                                       "block_table"};

bool is_json_input(const std::string& name) {
  for (const char* n : kJsonInputs) {
    if (name == n) return true;
  }
  return false;
}

Status key_error(const std::string& key, const std::string& rule) {
  return Status(Code::invalid_problem, "key '" + key + "': " + rule);
}

std::string joined(const char* const* names, size_t n) {
  std::string s;
  for (size_t i = 0; i < n; ++i) s += (i ? " " : "") + std::string(names[i]);
  return s;
}

// What a json value is, for "got ..." in messages; short, never the whole document.
std::string got(const json& v) {
  std::string s = v.dump();
  if (s.size() > 40) s = s.substr(0, 37) + "...";
  return std::string(v.type_name()) + " " + s;
}

// The value of `key`, or nullptr when absent or null (DESIGN §4: null means absent).
const json* find(const json& obj, const std::string& key) {
  auto it = obj.find(key);
  if (it == obj.end() || it->is_null()) return nullptr;
  return &*it;
}

Status get_int(const json& v, const std::string& key, int64_t* out) {
  if (!v.is_number_integer()) return key_error(key, "must be an integer, got " + got(v));
  if (v.is_number_unsigned() && v.get<uint64_t>() > uint64_t{INT64_MAX}) {
    return key_error(key, "is too large, got " + got(v));
  }
  *out = v.get<int64_t>();
  return Status();
}

Status get_bool(const json& v, const std::string& key, bool* out) {
  if (!v.is_boolean()) return key_error(key, "must be true or false, got " + got(v));
  *out = v.get<bool>();
  return Status();
}

Status get_number(const json& v, const std::string& key, double* out) {
  if (!v.is_number()) return key_error(key, "must be a number, got " + got(v));
  *out = v.get<double>();
  return Status();
}

Status get_int_array(const json& v, const std::string& key, std::vector<int64_t>* out) {
  if (!v.is_array()) return key_error(key, "must be an array of integers, got " + got(v));
  out->clear();
  for (size_t i = 0; i < v.size(); ++i) {
    int64_t x = 0;
    if (Status st = get_int(v[i], key + "[" + std::to_string(i) + "]", &x); !st) return st;
    out->push_back(x);
  }
  return Status();
}

// A sequence-length array: b values, each within [0, limit]. Checked here because these
// values never reach Plan::build (they live in device memory at execute, P6), and a length
// past the tensor would make a kernel read outside it.
Status get_seq_lens(const json& obj, const std::string& key, int64_t b, int64_t limit,
                    const char* limit_name, std::optional<std::vector<int64_t>>* out) {
  const json* v = find(obj, key);
  if (!v) return Status();
  std::vector<int64_t> lens;
  if (Status st = get_int_array(*v, key, &lens); !st) return st;
  if (static_cast<int64_t>(lens.size()) != b) {
    return key_error(key, "has " + std::to_string(lens.size()) + " values, must have b (" +
                              std::to_string(b) + ")");
  }
  for (size_t i = 0; i < lens.size(); ++i) {
    if (lens[i] < 0 || lens[i] > limit) {
      return key_error(key + "[" + std::to_string(i) + "]",
                       "is " + std::to_string(lens[i]) + ", must lie in [0, " + limit_name + " = " +
                           std::to_string(limit) + "]");
    }
  }
  *out = std::move(lens);
  return Status();
}

Status parse_mask(const json& v, Mask* mask) {
  if (!v.is_object())
    return key_error("mask", "must be an object {align, left, right}, got " + got(v));
  for (const auto& [k, value] : v.items()) {
    if (k != "align" && k != "left" && k != "right") {
      return key_error("mask." + k, "unknown (mask keys: align left right)");
    }
  }
  if (const json* a = find(v, "align")) {
    if (!a->is_string()) return key_error("mask.align", "must be a string, got " + got(*a));
    const std::string s = a->get<std::string>();
    if (s == "top_left") {
      mask->align = MaskAlign::top_left;
    } else if (s == "bottom_right") {
      mask->align = MaskAlign::bottom_right;
    } else {
      return key_error("mask.align", "is '" + s + "', must be top_left or bottom_right");
    }
  }
  for (const char* side : {"left", "right"}) {
    if (const json* b = find(v, side)) {
      int64_t x = 0;
      if (Status st = get_int(*b, std::string("mask.") + side, &x); !st) return st;
      (side[0] == 'l' ? mask->left : mask->right) = x;
    }
  }
  return Status();
}

// "ragged_q" / "ragged_kv": {"total": T, "offsets": [b + 1 integers]}. The offsets must be
// non-decreasing and lie in [0, total] (DESIGN 2.1); they are values, kept for read_case.
Status parse_ragged(const json& v, const std::string& key, int64_t b, int64_t* total,
                    std::vector<int64_t>* offsets) {
  if (!v.is_object()) {
    return key_error(key, "must be an object {\"total\": T, \"offsets\": [...]}, got " + got(v));
  }
  for (const auto& [k, value] : v.items()) {
    if (k != "total" && k != "offsets") {
      return key_error(key + "." + k, "unknown (" + key + " keys: total offsets)");
    }
  }
  const json* t = find(v, "total");
  if (!t) return key_error(key + ".total", "missing; the packed token count of the tensor");
  if (Status st = get_int(*t, key + ".total", total); !st) return st;
  if (*total <= 0) {
    return key_error(key + ".total", "is " + std::to_string(*total) + ", must be positive");
  }
  const json* o = find(v, "offsets");
  if (!o) return key_error(key + ".offsets", "missing; b + 1 token offsets");
  if (Status st = get_int_array(*o, key + ".offsets", offsets); !st) return st;
  if (static_cast<int64_t>(offsets->size()) != b + 1) {
    return key_error(key + ".offsets", "has " + std::to_string(offsets->size()) +
                                           " values, must have b + 1 (" + std::to_string(b + 1) +
                                           ")");
  }
  for (size_t i = 0; i < offsets->size(); ++i) {
    const int64_t x = (*offsets)[i];
    const std::string at = key + ".offsets[" + std::to_string(i) + "]";
    if (x < 0 || x > *total) {
      return key_error(at, "is " + std::to_string(x) +
                               ", must lie in [0, total = " + std::to_string(*total) + "]");
    }
    if (i > 0 && x < (*offsets)[i - 1]) {
      return key_error(at, "is " + std::to_string(x) + ", below the offset before it (" +
                               std::to_string((*offsets)[i - 1]) + "); offsets never decrease");
    }
    // Carried as float32 like every input array: exact up to 2^24.
    if (x > (int64_t{1} << 24)) {
      return key_error(at, "is " + std::to_string(x) + "; case files hold offsets up to 2^24");
    }
  }
  return Status();
}

// "paged_kv": {"page_size": P, "num_pages": N, "block_table": [[...], ...] (b rows of
// max_pages page numbers)}.
Status parse_paged(const json& v, int64_t b, Paged* paged,
                   std::vector<std::vector<int64_t>>* table) {
  const std::string key = "paged_kv";
  if (!v.is_object()) {
    return key_error(key, "must be an object {page_size, num_pages, block_table}, got " + got(v));
  }
  for (const auto& [k, value] : v.items()) {
    if (k != "page_size" && k != "num_pages" && k != "block_table") {
      return key_error(key + "." + k, "unknown (paged_kv keys: page_size num_pages block_table)");
    }
  }
  for (const char* name : {"page_size", "num_pages"}) {
    const json* x = find(v, name);
    if (!x) return key_error(key + "." + name, "missing");
    int64_t value = 0;
    if (Status st = get_int(*x, key + "." + name, &value); !st) return st;
    if (value <= 0) {
      return key_error(key + "." + name, "is " + std::to_string(value) + ", must be positive");
    }
    (name[0] == 'p' ? paged->page_size : paged->num_pages) = value;
  }
  const json* t = find(v, "block_table");
  if (!t) return key_error(key + ".block_table", "missing; b rows of page numbers");
  if (!t->is_array() || static_cast<int64_t>(t->size()) != b) {
    return key_error(key + ".block_table",
                     "must be an array of b (" + std::to_string(b) + ") rows, got " + got(*t));
  }
  table->clear();
  for (size_t r = 0; r < t->size(); ++r) {
    std::vector<int64_t> row;
    const std::string at = key + ".block_table[" + std::to_string(r) + "]";
    if (Status st = get_int_array((*t)[r], at, &row); !st) return st;
    if (row.empty() || (r > 0 && row.size() != table->front().size())) {
      return key_error(at, "has " + std::to_string(row.size()) +
                               " entries; every row holds max_pages (> 0) entries");
    }
    for (size_t c = 0; c < row.size(); ++c) {
      if (row[c] < INT32_MIN || row[c] > INT32_MAX) {
        return key_error(at + "[" + std::to_string(c) + "]", "must fit i32");
      }
    }
    table->push_back(std::move(row));
  }
  paged->max_pages = static_cast<int64_t>(table->front().size());
  return Status();
}

std::vector<int64_t> dims_of(const TensorDesc& d) {
  return std::vector<int64_t>(d.dims.begin(), d.dims.begin() + d.rank);
}

bool is_packed(const TensorDesc& d) {
  int64_t stride = 1;
  for (int i = d.rank - 1; i >= 0; --i) {
    if (d.strides[i] != stride) return false;
    stride *= d.dims[i];
  }
  return true;
}

bool same_desc(const TensorDesc& a, const TensorDesc& b) {
  if (a.dtype != b.dtype || a.rank != b.rank) return false;
  for (int i = 0; i < a.rank; ++i) {
    if (a.dims[i] != b.dims[i] || a.strides[i] != b.strides[i]) return false;
  }
  return true;
}

}  // namespace

Status shape_fits(const Shape& s, int64_t bias_b, int64_t bias_h) {
  struct Dims {
    const char* tensor;
    const char* keys;
    int64_t d[4];
  };
  const Dims all[] = {{"q", "b h_q s_q d_qk", {s.b, s.h_q, s.s_q, s.d_qk}},
                      {"k", "b h_kv s_kv d_qk", {s.b, s.h_kv, s.s_kv, s.d_qk}},
                      {"v", "b h_kv s_kv d_v", {s.b, s.h_kv, s.s_kv, s.d_v}},
                      {"o", "b h_q s_q d_v", {s.b, s.h_q, s.s_q, s.d_v}},
                      {"stats", "b h_q s_q", {s.b, s.h_q, s.s_q, 1}},
                      {"bias", "bias[0] bias[1] s_q s_kv", {bias_b, bias_h, s.s_q, s.s_kv}}};
  for (const Dims& t : all) {
    // In bytes (4 per element at most), innermost dim first as the packed strides are made,
    // every partial product checked: a zero size further out does not make an overflow
    // further in harmless.
    int64_t n = 4;
    bool overflow = false;
    for (int i = 3; i >= 0; --i) overflow |= __builtin_mul_overflow(n, t.d[i], &n);
    if (overflow) {
      return Status(Code::invalid_problem,
                    std::string("tensor '") + t.tensor + "': the product of " + t.keys +
                        " overflows 64 bits (" + std::to_string(t.d[0]) + " x " +
                        std::to_string(t.d[1]) + " x " + std::to_string(t.d[2]) + " x " +
                        std::to_string(t.d[3]) + ")");
    }
  }
  return Status();
}

TensorId tensor_of(const std::string& name) {
  TensorId id{};
  if (!tensor_id_from_string(name.c_str(), &id)) {
    throw std::invalid_argument("tensor_of: '" + name + "' names no tensor");
  }
  return id;
}

Result<Problem> problem_from_json(const json& j) {
  if (!j.is_object())
    return Status(Code::invalid_problem, "problem.json: must be a JSON object, got " + got(j));
  std::set<std::string> known = {"op", "dtype"};
  for (const char* k : kShapeKeys) known.insert(k);
  for (const char* k : kOptionalKeys) known.insert(k);
  for (const auto& [k, v] : j.items()) {
    if (!known.count(k)) {
      return key_error(k, "unknown (keys: op dtype " + joined(kShapeKeys, 7) + " " +
                              joined(kOptionalKeys, std::size(kOptionalKeys)) + ")");
    }
  }

  const json* op = find(j, "op");
  if (!op) return key_error("op", "missing; must be fwd or bwd");
  if (!op->is_string() || (*op != "fwd" && *op != "bwd")) {
    return key_error("op", "must be fwd or bwd, got " + got(*op));
  }
  const json* dt = find(j, "dtype");
  if (!dt) return key_error("dtype", "missing; must be f16 or bf16");
  if (!dt->is_string() || (*dt != "f16" && *dt != "bf16")) {
    return key_error("dtype", "must be f16 or bf16, got " + got(*dt));
  }
  int64_t dims[7] = {};
  for (int i = 0; i < 7; ++i) {
    const json* v = find(j, kShapeKeys[i]);
    if (!v)
      return key_error(kShapeKeys[i], "missing; every problem gives b h_q h_kv s_q s_kv d_qk d_v");
    if (Status st = get_int(*v, kShapeKeys[i], &dims[i]); !st) return st;
  }
  const Shape shape{dims[0], dims[1], dims[2], dims[3], dims[4], dims[5], dims[6]};
  const DType dtype = *dt == "f16" ? DType::f16 : DType::bf16;
  const bool backward = *op == "bwd";
  // Before the Problem is made: it lays its tensors out packed, multiplying the sizes.
  if (Status st = shape_fits(shape); !st) return st;
  Problem p = backward ? Problem::backward(shape, dtype) : Problem::forward(shape, dtype);

  // The layout first (ragged, paged: DESIGN 2.1, 2.2), then the declarations: set_stats,
  // set_bias and set_sink declare packed tensors; strides come last.
  std::vector<int64_t> offsets;
  for (const char* key : {"ragged_q", "ragged_kv"}) {
    if (const json* v = find(j, key)) {
      int64_t total = 0;
      if (Status st = parse_ragged(*v, key, shape.b, &total, &offsets); !st) return st;
      if (key[7] == 'q') {
        p.set_ragged_q(total);
      } else {
        p.set_ragged_kv(total);
      }
    }
  }
  std::vector<std::vector<int64_t>> table;
  if (const json* v = find(j, "paged_kv")) {
    if (find(j, "ragged_kv")) {
      return key_error("paged_kv", "excludes ragged_kv (a key side is packed or paged)");
    }
    if (backward) return key_error("paged_kv", "forward only (\"op\": \"fwd\"; DESIGN 2.2)");
    Paged pg;
    if (Status st = parse_paged(*v, shape.b, &pg, &table); !st) return st;
    if (!find(j, "seq_len_kv")) {
      return key_error("seq_len_kv", "missing; a paged_kv case gives the key length of each batch");
    }
    p.set_paged_kv(pg.page_size, pg.num_pages, pg.max_pages);
  }
  if (const json* v = find(j, "stats")) {
    bool on = false;
    if (Status st = get_bool(*v, "stats", &on); !st) return st;
    if (backward && !on) {
      return key_error("stats", "false, but the backward always reads stats (drop the key)");
    }
    p.set_stats(on);
  }
  if (const json* v = find(j, "bias")) {
    std::vector<int64_t> bd;
    if (Status st = get_int_array(*v, "bias", &bd); !st) return st;
    if (bd.size() != 2) {
      return key_error("bias", "must be [b_dim, h_dim] (2 integers), got " + got(*v));
    }
    if (Status st = shape_fits(shape, bd[0], bd[1]); !st) return st;
    p.set_bias(bd[0], bd[1]);
  }
  if (const json* v = find(j, "sink")) {
    bool on = false;
    if (Status st = get_bool(*v, "sink", &on); !st) return st;
    p.set_sink(on);
  }
  std::optional<std::vector<int64_t>> lens;
  if (Status st = get_seq_lens(j, "seq_len_q", shape.b, shape.s_q, "s_q", &lens); !st) return st;
  p.set_seq_len_q(lens.has_value());
  lens.reset();
  if (Status st = get_seq_lens(j, "seq_len_kv", shape.b, shape.s_kv, "s_kv", &lens); !st) return st;
  p.set_seq_len_kv(lens.has_value());
  if (p.paged_kv()) {
    // The pages a batch's keys need must exist; the rest of its row may hold anything.
    const Paged& pg = *p.paged_kv();
    for (int64_t b = 0; b < shape.b; ++b) {
      const int64_t need = ((*lens)[b] + pg.page_size - 1) / pg.page_size;
      for (int64_t c = 0; c < need && c < pg.max_pages; ++c) {
        const int64_t page = table[b][c];
        if (page < 0 || page >= pg.num_pages) {
          return key_error(
              "paged_kv.block_table[" + std::to_string(b) + "][" + std::to_string(c) + "]",
              "is " + std::to_string(page) +
                  ", must lie in [0, num_pages = " + std::to_string(pg.num_pages) + ") (batch " +
                  std::to_string(b) + " has " + std::to_string((*lens)[b]) + " keys)");
        }
      }
    }
  }
  if (const json* v = find(j, "scale")) {
    double x = 0;
    if (Status st = get_number(*v, "scale", &x); !st) return st;
    p.set_scale(x);
  }
  if (const json* v = find(j, "softcap")) {
    double x = 0;
    if (Status st = get_number(*v, "softcap", &x); !st) return st;
    p.set_softcap(x);
  }
  if (const json* v = find(j, "mask")) {
    Mask m;
    if (Status st = parse_mask(*v, &m); !st) return st;
    p.set_mask(m);
  }
  if (const json* v = find(j, "deterministic")) {
    bool on = false;
    if (Status st = get_bool(*v, "deterministic", &on); !st) return st;
    p.set_deterministic(on);
  }
  if (const json* v = find(j, "split_tokens")) {
    int64_t n = 0;
    if (Status st = get_int(*v, "split_tokens", &n); !st) return st;
    p.set_split_tokens(n);
  }
  if (const json* v = find(j, "strides")) {
    if (!v->is_object())
      return key_error("strides", "must be an object {tensor: [strides]}, got " + got(*v));
    for (const auto& [name, sv] : v->items()) {
      const std::string key = "strides." + name;
      bool allowed = false;
      for (const char* n : kStrideNames) allowed |= name == n;
      if (!allowed) {
        return key_error(key, "unknown tensor (strides names: " +
                                  joined(kStrideNames, std::size(kStrideNames)) + ")");
      }
      if (sv.is_null()) continue;  // absent: packed
      std::vector<int64_t> strides;
      if (Status st = get_int_array(sv, key, &strides); !st) return st;
      const TensorId id = tensor_of(name);
      if (!p.has(id)) {
        return key_error(key,
                         "tensor '" + name + "' is not declared by this " +
                             (backward ? "backward" : "forward") + " problem" +
                             (name == "stats" ? " (a forward writes stats with \"stats\": true)"
                              : name == "bias" || name == "dbias" ? " (declare it with \"bias\")"
                                                                  : ""));
      }
      TensorDesc d = *p.tensor(id);
      if (static_cast<int>(strides.size()) != d.rank) {
        return key_error(key, std::to_string(strides.size()) + " strides given, tensor '" + name +
                                  "' has rank " + std::to_string(d.rank));
      }
      for (int i = 0; i < d.rank; ++i) d.strides[i] = strides[i];
      p.set_tensor(id, d);
    }
  }
  return p;
}

Result<json> problem_to_json(const Problem& p, const ArrayMap& inputs) {
  const bool serving = p.ragged_q() || p.ragged_kv() || p.paged_kv();
  for (TensorId id : {TensorId::q, TensorId::k, TensorId::v}) {
    if (!p.has(id) || (!serving && p.tensor(id)->rank != 4)) {
      return Status(Code::invalid_problem, std::string("problem_to_json: tensor '") +
                                               to_string(id) + "' must be declared with rank 4");
    }
  }
  const bool backward = p.direction() == Direction::backward;
  json j;
  j["op"] = backward ? "bwd" : "fwd";
  j["dtype"] = p.dtype() == DType::f16 ? "f16" : "bf16";
  if (p.dtype() != DType::f16 && p.dtype() != DType::bf16) {
    return Status(Code::invalid_problem, std::string("problem_to_json: dtype ") +
                                             to_string(p.dtype()) + " is not f16 or bf16");
  }
  if (serving) {
    // No tensor holds the envelope: it is the shape the problem was made with.
    const Shape& s = p.shape();
    j["b"] = s.b;
    j["h_q"] = s.h_q;
    j["h_kv"] = s.h_kv;
    j["s_q"] = s.s_q;
    j["s_kv"] = s.s_kv;
    j["d_qk"] = s.d_qk;
    j["d_v"] = s.d_v;
  } else {
    const TensorDesc& q = *p.tensor(TensorId::q);
    const TensorDesc& k = *p.tensor(TensorId::k);
    const TensorDesc& v = *p.tensor(TensorId::v);
    j["b"] = q.dims[0];
    j["h_q"] = q.dims[1];
    j["h_kv"] = k.dims[1];
    j["s_q"] = q.dims[2];
    j["s_kv"] = k.dims[2];
    j["d_qk"] = q.dims[3];
    j["d_v"] = v.dims[3];
  }
  // The integer arrays (offsets, block table) come from `inputs`, as the lengths do.
  auto int_values = [&](const char* name, std::vector<int64_t>* out) -> Status {
    auto it = inputs.find(name);
    if (it == inputs.end()) {
      return Status(Code::invalid_problem, std::string("problem_to_json: the problem declares ") +
                                               name + "; its values must be given as an input");
    }
    out->clear();
    for (float x : it->second.data) {
      if (x != std::floor(x)) {
        return Status(Code::invalid_problem, std::string("problem_to_json: ") + name +
                                                 " holds a value that is not an integer");
      }
      out->push_back(static_cast<int64_t>(x));
    }
    return Status();
  };
  for (const auto& [key, side, offsets_name] :
       {std::tuple<const char*, const std::optional<Ragged>*, const char*>{
            "ragged_q", &p.ragged_q(), "offsets_q"},
        {"ragged_kv", &p.ragged_kv(), "offsets_kv"}}) {
    if (!*side) continue;
    std::vector<int64_t> offsets;
    if (Status st = int_values(offsets_name, &offsets); !st) return st;
    j[key] = {{"total", (*side)->total}, {"offsets", offsets}};
  }
  if (p.paged_kv()) {
    std::vector<int64_t> flat;
    if (Status st = int_values("block_table", &flat); !st) return st;
    const int64_t width = p.paged_kv()->max_pages;
    json rows = json::array();
    for (size_t r = 0; width > 0 && r < flat.size() / static_cast<size_t>(width); ++r) {
      rows.push_back(
          std::vector<int64_t>(flat.begin() + r * width, flat.begin() + (r + 1) * width));
    }
    j["paged_kv"] = {{"page_size", p.paged_kv()->page_size},
                     {"num_pages", p.paged_kv()->num_pages},
                     {"block_table", rows}};
  }
  json strides = json::object();
  for (const char* name : kStrideNames) {
    const TensorId id = tensor_of(name);
    if (p.has(id) && !is_packed(*p.tensor(id))) {
      const TensorDesc& d = *p.tensor(id);
      strides[name] = std::vector<int64_t>(d.strides.begin(), d.strides.begin() + d.rank);
    }
  }
  if (!strides.empty()) j["strides"] = strides;
  if (p.scale()) j["scale"] = *p.scale();
  if (p.softcap()) j["softcap"] = *p.softcap();
  const Mask& m = p.mask();
  if (m.is_band() || m.align != MaskAlign::top_left) {
    json mj;
    mj["align"] = m.align == MaskAlign::top_left ? "top_left" : "bottom_right";
    mj["left"] = m.left ? json(*m.left) : json(nullptr);
    mj["right"] = m.right ? json(*m.right) : json(nullptr);
    j["mask"] = mj;
  }
  for (const char* name : {"seq_len_q", "seq_len_kv"}) {
    if (!p.has(tensor_of(name))) continue;
    auto it = inputs.find(name);
    if (it == inputs.end()) {
      return Status(Code::invalid_problem, std::string("problem_to_json: the problem declares ") +
                                               name + "; its values must be given as an input");
    }
    std::vector<int64_t> lens;
    for (float x : it->second.data) {
      if (x != std::floor(x)) {
        return Status(Code::invalid_problem, std::string("problem_to_json: ") + name +
                                                 " holds a value that is not an integer");
      }
      lens.push_back(static_cast<int64_t>(x));
    }
    j[name] = lens;
  }
  if (p.has(TensorId::bias)) {
    const TensorDesc& b = *p.tensor(TensorId::bias);
    j["bias"] = {b.dims[0], b.dims[1]};
  }
  if (p.has(TensorId::sink)) j["sink"] = true;
  if (!backward && p.has(TensorId::stats)) j["stats"] = true;
  if (p.deterministic()) j["deterministic"] = true;
  if (p.split_tokens()) j["split_tokens"] = *p.split_tokens();

  // Whatever the json cannot say (a tensor of another dtype or shape, a bias without its
  // gradient) shows up as a difference once read back.
  Result<Problem> back = problem_from_json(j);
  if (!back) return Status(Code::invalid_problem, "problem_to_json: " + back.status().message());
  for (int i = 0; i < kTensorCount; ++i) {
    const auto id = static_cast<TensorId>(i);
    const auto& a = p.tensor(id);
    const auto& b = back->tensor(id);
    if (a.has_value() != b.has_value() || (a && !same_desc(*a, *b))) {
      return Status(Code::invalid_problem,
                    std::string("problem_to_json: tensor '") + to_string(id) +
                        "' cannot be expressed in problem.json (its declaration, dtype, dims "
                        "or strides differ from what the keys imply)");
    }
  }
  return j;
}

std::vector<std::string> input_names(const Problem& p) {
  std::vector<std::string> names = {"q", "k", "v"};
  if (p.direction() == Direction::backward) {
    names.insert(names.end(), {"o", "do", "stats"});
  }
  for (const char* n :
       {"bias", "sink", "seq_len_q", "seq_len_kv", "offsets_q", "offsets_kv", "block_table"}) {
    if (p.has(tensor_of(n))) names.emplace_back(n);
  }
  return names;
}

std::vector<std::string> output_names(const Problem& p) {
  std::vector<std::string> names;
  const char* const fwd[] = {"o", "stats"};
  const char* const bwd[] = {"dq", "dk", "dv", "dbias", "dsink"};
  if (p.direction() == Direction::forward) {
    for (const char* n : fwd) {
      if (p.has(tensor_of(n))) names.emplace_back(n);
    }
  } else {
    for (const char* n : bwd) {
      if (p.has(tensor_of(n))) names.emplace_back(n);
    }
  }
  return names;
}

Result<json> parse_problem_json(const std::string& text, const std::string& path) {
  // Duplicate keys are refused (nlohmann keeps the last silently): one set of keys per open
  // object, and the key path so far for the message.
  std::vector<std::set<std::string>> seen;
  std::vector<std::string> where;
  std::string duplicate;
  const json::parser_callback_t on_event = [&](int, json::parse_event_t event, json& parsed) {
    switch (event) {
      case json::parse_event_t::object_start:
        seen.emplace_back();
        break;
      case json::parse_event_t::key: {
        const std::string key = parsed.get<std::string>();
        if (!seen.empty() && !seen.back().insert(key).second && duplicate.empty()) {
          // The keys of the enclosing objects, then this one.
          for (size_t i = 0; i + 1 < seen.size() && i < where.size(); ++i) {
            duplicate += where[i] + ".";
          }
          duplicate += key;
        }
        where.resize(seen.size());
        if (!where.empty()) where.back() = key;
        break;
      }
      case json::parse_event_t::object_end:
        if (!seen.empty()) seen.pop_back();
        where.resize(seen.size());
        break;
      default:
        break;
    }
    return true;
  };
  json j;
  try {
    j = json::parse(text, on_event);
  } catch (const json::exception& e) {
    // parse_error, and out_of_range for a number no double holds (1e400).
    return Status(Code::invalid_argument, path + ": not valid JSON: " + e.what());
  }
  if (!duplicate.empty()) {
    return Status(Code::invalid_argument,
                  path + ": key '" + duplicate + "' appears twice (JSON keys must be unique)");
  }
  return j;
}

Status check_spans(const Problem& problem) {
  for (int i = 0; i < kTensorCount; ++i) {
    const auto id = static_cast<TensorId>(i);
    if (!problem.has(id)) continue;
    size_t bytes = 0;
    if (Status st = span_bytes_checked(id, *problem.tensor(id), &bytes); !st) return st;
  }
  return Status();
}

Result<Case> read_case_problem(const std::string& dir) {
  const fs::path folder(dir);
  std::error_code ec;
  if (!fs::is_directory(folder, ec)) {
    return Status(Code::invalid_argument,
                  dir + (fs::exists(folder, ec) ? ": not a folder" : ": no such folder") +
                      " (a case is a folder holding problem.json and the inputs)");
  }
  const std::string json_path = (folder / "problem.json").string();
  if (fs::is_directory(json_path, ec)) {
    return Status(Code::invalid_argument, json_path + ": is a directory, not a file");
  }
  std::ifstream in(json_path, std::ios::binary);
  if (!in)
    return Status(Code::invalid_argument,
                  json_path + ": cannot open (is " + dir + " a case folder?)");
  // Bounded: a problem is a few hundred bytes; a link to an endless file must not be read
  // until memory runs out.
  std::string text(kMaxProblemJsonBytes + 1, '\0');
  in.read(text.data(), static_cast<std::streamsize>(text.size()));
  text.resize(static_cast<size_t>(in.gcount()));
  if (text.size() > kMaxProblemJsonBytes) {
    return Status(Code::invalid_argument, json_path + ": larger than " +
                                              std::to_string(kMaxProblemJsonBytes) +
                                              " bytes; not a problem description");
  }
  Result<json> parsed = parse_problem_json(text, json_path);
  if (!parsed) return parsed.status();
  Case c;
  c.dir = dir;
  c.json = std::move(parsed.value());
  Result<Problem> problem = problem_from_json(c.json);
  if (!problem)
    return Status(problem.status().code(), json_path + ": " + problem.status().message());
  c.problem = std::move(problem.value());
  if (Status st = check_spans(c.problem); !st) {
    return Status(st.code(), json_path + ": " + st.message());
  }
  return c;
}

Result<Case> read_case(const std::string& dir) {
  Result<Case> read = read_case_problem(dir);
  if (!read) return read.status();
  Case& c = read.value();
  const fs::path folder(dir);
  // The problem's own rules first, as explain checks them: a message about an input's shape
  // would hide the rule the problem breaks. The reference engine serves every valid problem,
  // so a CPU plan fails here only for an invalid one.
  if (Result<Plan> plan = Plan::build(c.problem, Target::cpu());
      !plan && plan.status().code() == Code::invalid_problem) {
    return Status(Code::invalid_problem,
                  (folder / "problem.json").string() + ": " + plan.status().message());
  }
  const std::vector<std::string> needed = input_names(c.problem);
  // A .npy the problem does not read is refused: it is most likely meant (a bias.npy without
  // "bias" in problem.json), and ignoring it would run another problem than the user's.
  std::error_code ec;
  for (fs::directory_iterator it(folder, ec), end; !ec && it != end; it.increment(ec)) {
    const fs::path& f = it->path();
    if (f.extension() != ".npy") continue;
    const std::string stem = f.stem().string();
    bool used = false;
    for (const std::string& n : needed) used |= n == stem && !is_json_input(n);
    if (used) continue;
    std::string why = "the problem does not read an input '" + stem + "'";
    if (stem == "bias" || stem == "sink") {
      why += " (declare it in problem.json with \"" + stem + "\")";
    } else if (stem == "seq_len_q" || stem == "seq_len_kv") {
      why += " (sequence lengths are given in problem.json as \"" + stem + "\": [...])";
    } else if (is_json_input(stem)) {
      why +=
          " (offsets and block tables are given in problem.json under \"ragged_q\", "
          "\"ragged_kv\" and \"paged_kv\")";
    } else if (stem == "o" || stem == "do" || stem == "stats") {
      why += " (a forward reads q k v; a backward also o do stats)";
    }
    return Status(
        Code::invalid_argument, f.string() + ": " + why + "; inputs: " + [&] {
          std::string s;
          for (const std::string& n : needed) s += (s.empty() ? "" : " ") + n;
          return s;
        }());
  }
  for (const std::string& name : needed) {
    const TensorDesc& d = *c.problem.tensor(tensor_of(name));
    const std::vector<int64_t> want = dims_of(d);
    if (is_json_input(name)) {
      HostArray a;
      a.shape = want;
      const json& values = name == "offsets_q"     ? c.json.at("ragged_q").at("offsets")
                           : name == "offsets_kv"  ? c.json.at("ragged_kv").at("offsets")
                           : name == "block_table" ? c.json.at("paged_kv").at("block_table")
                                                   : c.json.at(name);
      for (const json& x : values) {
        if (x.is_array()) {
          for (const json& y : x) a.data.push_back(static_cast<float>(y.get<int64_t>()));
        } else {
          a.data.push_back(static_cast<float>(x.get<int64_t>()));
        }
      }
      c.inputs[name] = std::move(a);
      continue;
    }
    const std::string path = (folder / (name + ".npy")).string();
    if (!fs::exists(path, ec)) {
      return Status(Code::invalid_argument, path + ": missing; the problem needs input '" + name +
                                                "' of shape " + shape_text(want));
    }
    Result<HostArray> a = read_npy(path);
    if (!a) return a.status();
    if (a->shape != want) {
      return Status(Code::invalid_argument, path + ": shape " + shape_text(a->shape) +
                                                ", the problem needs " + shape_text(want) +
                                                " for input '" + name + "'");
    }
    c.inputs[name] = std::move(a.value());
  }
  return read;
}

Status write_case(const std::string& dir, const json& json_in, const ArrayMap& inputs) {
  std::error_code ec;
  fs::create_directories(dir, ec);
  if (ec)
    return Status(Code::invalid_argument, dir + ": cannot create the folder: " + ec.message());
  json j = json_in;
  for (const auto& [name, array] : inputs) {
    if (is_json_input(name)) {
      std::vector<int64_t> values;
      for (float x : array.data) values.push_back(static_cast<int64_t>(x));
      if (name == "offsets_q" || name == "offsets_kv") {
        j[name == "offsets_q" ? "ragged_q" : "ragged_kv"]["offsets"] = values;
      } else if (name == "block_table") {
        const size_t width = array.shape.size() == 2 ? static_cast<size_t>(array.shape[1]) : 0;
        json rows = json::array();
        for (size_t r = 0; width > 0 && r < values.size() / width; ++r) {
          rows.push_back(
              std::vector<int64_t>(values.begin() + r * width, values.begin() + (r + 1) * width));
        }
        j["paged_kv"]["block_table"] = rows;
      } else {
        j[name] = values;
      }
      continue;
    }
    if (Status st = write_npy((fs::path(dir) / (name + ".npy")).string(), array); !st) return st;
  }
  const std::string json_path = (fs::path(dir) / "problem.json").string();
  std::ofstream out(json_path, std::ios::trunc);
  if (!out) return Status(Code::invalid_argument, json_path + ": cannot open for writing");
  out << j.dump(2) << "\n";
  out.close();
  if (!out) return Status(Code::invalid_argument, json_path + ": write failed");
  return Status();
}

Status write_case(const std::string& dir, const Problem& problem, const ArrayMap& inputs) {
  Result<json> j = problem_to_json(problem, inputs);
  if (!j) return j.status();
  return write_case(dir, *j, inputs);
}

namespace {

// A stream and two events, destroyed on every path out of run_case.
struct CudaTimer {
  cudaStream_t stream = nullptr;
  cudaEvent_t start = nullptr, stop = nullptr;

  Status init() {
    cudaError_t err = cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking);
    if (err == cudaSuccess) err = cudaEventCreate(&start);
    if (err == cudaSuccess) err = cudaEventCreate(&stop);
    if (err != cudaSuccess) {
      cudaGetLastError();
      return Status(Code::device_error,
                    std::string("run: stream/event creation failed: ") + cudaGetErrorString(err));
    }
    return Status();
  }
  ~CudaTimer() {
    if (stop) cudaEventDestroy(stop);
    if (start) cudaEventDestroy(start);
    if (stream) cudaStreamDestroy(stream);
  }
};

}  // namespace

void limit_smem_per_block(Target& target, int smem_limit_kb) {
  if (smem_limit_kb > 0) {
    target.smem_per_block_optin =
        std::min(target.smem_per_block_optin, static_cast<size_t>(smem_limit_kb) * 1024);
  }
}

Result<RunResult> run_case(const Case& c, const std::string& engine, Memory memory,
                           int smem_limit_kb) {
  Target target = Target::cpu();
  if (memory == Memory::device) {
    Result<Target> t = Target::cuda();
    if (!t) return t.status();
    target = *t;
    limit_smem_per_block(target, smem_limit_kb);
  }
  PlanOptions options;
  options.engine = engine;
  Result<Plan> plan = Plan::build(c.problem, target, options);
  if (!plan) return plan.status();

  Result<TensorBuffers> buffers = TensorBuffers::create(c.problem, memory);
  if (!buffers) return buffers.status();
  for (const std::string& name : input_names(c.problem)) {
    auto it = c.inputs.find(name);
    if (it == c.inputs.end()) {
      return Status(Code::invalid_argument, "input '" + name + "': missing from the case");
    }
    if (Status st = buffers->upload(tensor_of(name), it->second); !st) return st;
  }
  if (Status st = buffers->poison_outputs(); !st) return st;

  // The workspace: exactly what the plan asks, guarded like the tensors. Filled with 0xff
  // (NaN as f32, -1 as i32) so that an engine relying on zeroed memory fails here.
  const size_t ws_bytes = plan->workspace_bytes();
  GuardedBlock workspace;
  if (ws_bytes > 0) {
    Result<GuardedBlock> ws = GuardedBlock::create(ws_bytes, memory, "workspace");
    if (!ws) return ws.status();
    workspace = std::move(ws.value());
    if (Status st = workspace.fill_payload(0xFF); !st) return st;
  }

  RunResult result;
  result.engine = plan->engine();
  {
    const std::string explained = plan->explain();
    const size_t at = explained.find("\nplan: ");
    if (at != std::string::npos) {
      const size_t begin = at + 7;
      result.kernel = explained.substr(begin, explained.find_first_of(":\n", begin) - begin);
    }
  }
  result.workspace_bytes = ws_bytes;
  const Arguments args = buffers->arguments();
  if (memory == Memory::device) {
    CudaTimer timer;
    if (Status st = timer.init(); !st) return st;
    cudaEventRecord(timer.start, timer.stream);
    Status st = plan->execute(args, workspace.payload(), ws_bytes, timer.stream);
    cudaEventRecord(timer.stop, timer.stream);
    const cudaError_t err = cudaStreamSynchronize(timer.stream);
    if (!st) return st;
    if (err != cudaSuccess) {
      cudaGetLastError();
      return Status(Code::device_error, std::string("run: the execute failed on the device: ") +
                                            cudaGetErrorString(err));
    }
    float ms = 0;
    cudaEventElapsedTime(&ms, timer.start, timer.stop);
    result.milliseconds = ms;
  } else {
    const auto t0 = std::chrono::steady_clock::now();
    Status st = plan->execute(args, workspace.payload(), ws_bytes);
    const auto t1 = std::chrono::steady_clock::now();
    if (!st) return st;
    result.milliseconds = std::chrono::duration<double, std::milli>(t1 - t0).count();
  }

  if (Status st = buffers->check_guards(); !st) return st;
  if (Status st = workspace.check_canaries(); !st) return st;
  for (const std::string& name : output_names(c.problem)) {
    Result<HostArray> a = buffers->download(tensor_of(name));
    if (!a) return a.status();
    result.outputs[name] = std::move(a.value());
  }
  return result;
}

}  // namespace floe::tool

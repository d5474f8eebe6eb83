#include "buffers.h"

#include <cmath>
#include <cstdio>
#include <cstring>
#include <limits>
#include <new>

#include "common/dtype_convert.h"

namespace floe::tool {

namespace {

bool is_output(TensorId id, Direction dir) {
  if (dir == Direction::forward) return id == TensorId::o || id == TensorId::stats;
  return id == TensorId::dq || id == TensorId::dk || id == TensorId::dv || id == TensorId::dbias ||
         id == TensorId::dsink;
}

std::string tensor_name(TensorId id) {
  return std::string("tensor '") + to_string(id) + "'";
}

std::string dims_text(const int64_t* dims, int rank) {
  std::string s = "(";
  for (int i = 0; i < rank; ++i) s += (i ? ", " : "") + std::to_string(dims[i]);
  return s + ")";
}

std::string index_text(const std::array<int64_t, TensorDesc::kMaxRank>& idx, int rank) {
  std::string s = "[";
  for (int i = 0; i < rank; ++i) s += (i ? ", " : "") + std::to_string(idx[i]);
  return s + "]";
}

std::string num_text(double x) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.9g", x);
  return buf;
}

std::string hex_bits(uint64_t bits, size_t bytes) {
  char buf[24];
  std::snprintf(buf, sizeof buf, "0x%0*llx", static_cast<int>(bytes * 2),
                static_cast<unsigned long long>(bits));
  return buf;
}

// Calls fn(linear, offset, index) for every logical index in C order: `linear` counts
// logical elements, `offset` is the element offset from the base the strides give.
template <class Fn>
void for_each_index(const TensorDesc& d, Fn&& fn) {
  const int64_t n = d.numel();
  if (n <= 0) return;
  std::array<int64_t, TensorDesc::kMaxRank> idx{};
  int64_t offset = 0;
  for (int64_t linear = 0; linear < n; ++linear) {
    fn(linear, offset, idx);
    // Never a stride past the last index: the offset stays within the span, which
    // span_bytes_checked proved fits (stepping past it overflowed for huge strides).
    for (int i = d.rank - 1; i >= 0; --i) {
      if (++idx[i] < d.dims[i]) {
        offset += d.strides[i];
        break;
      }
      offset -= d.strides[i] * (d.dims[i] - 1);
      idx[i] = 0;
    }
  }
}

uint64_t load_bits(const unsigned char* p, size_t bytes) {
  uint64_t v = 0;
  std::memcpy(&v, p, bytes);  // little-endian host: the low bytes
  return v;
}

void store_bits(unsigned char* p, size_t bytes, uint64_t v) {
  std::memcpy(p, &v, bytes);
}

}  // namespace

// One tensor: its block, and the image the whole allocation must hold (canaries, poison,
// uploaded inputs). The image lets check_guards() tell exactly which byte a run changed.
struct TensorBuffers::State {
  struct Slot {
    bool declared = false;
    bool output = false;
    TensorDesc desc;
    GuardedBlock block;
    std::vector<unsigned char> image;
    std::vector<uint8_t> addressed;  // per element of the span: reached by a logical index
    bool aliased = false;            // some element is reached by several indices
  };

  Problem problem = Problem::forward(Shape{}, DType::bf16);
  Memory memory = Memory::host;
  std::array<Slot, kTensorCount> slots;

  // The blocks free their memory (free or cudaFree) when the last State holding them goes.
  ~State() = default;

  unsigned char* element(Slot& s, int64_t offset) {
    return s.image.data() + GuardedBlock::kCanaryBytes + offset * size_of(s.desc.dtype);
  }
};

Status span_bytes_checked(TensorId id, const TensorDesc& d, size_t* bytes) {
  *bytes = 0;
  for (int i = 0; i < d.rank; ++i) {
    if (d.dims[i] <= 0) return Status();  // no element: whatever the strides, no span
  }
  int64_t numel = 1, last = 0;
  bool overflow = false;
  for (int i = 0; i < d.rank; ++i) {
    int64_t term = 0, stride = d.strides[i];
    overflow |= __builtin_mul_overflow(numel, d.dims[i], &numel);
    if (stride < 0) overflow |= __builtin_sub_overflow(int64_t{0}, stride, &stride);  // INT64_MIN
    overflow |= __builtin_mul_overflow(d.dims[i] - 1, stride, &term);
    overflow |= __builtin_add_overflow(last, term, &last);
  }
  int64_t total = 0;
  overflow |= __builtin_add_overflow(last, int64_t{1}, &total);
  overflow |= __builtin_mul_overflow(total, static_cast<int64_t>(size_of(d.dtype)), &total);
  // The canaries and the alignment padding go around the span: keep room for them.
  overflow |= total > std::numeric_limits<int64_t>::max() / 2;
  if (overflow) {
    return Status(Code::invalid_problem, tensor_name(id) + ": dims " +
                                             dims_text(d.dims.data(), d.rank) + " and strides " +
                                             dims_text(d.strides.data(), d.rank) +
                                             " address more memory than 64-bit sizes hold");
  }
  *bytes = static_cast<size_t>(total);
  return Status();
}

uint32_t TensorBuffers::poison_bits(DType dtype) {
  switch (dtype) {
    case DType::f16:
      return 0x7E5A;
    case DType::bf16:
      return 0x7FDA;
    case DType::f32:
      return 0x7FC05A5A;
    case DType::i32:
    case DType::i64:  // as a 64-bit integer, 2^31 - 1
      return 0x7FFFFFFF;
  }
  return 0;
}

Result<TensorBuffers> TensorBuffers::create(const Problem& problem, Memory memory) {
  auto state = std::make_shared<State>();
  state->problem = problem;
  state->memory = memory;
  try {
    for (int i = 0; i < kTensorCount; ++i) {
      const auto id = static_cast<TensorId>(i);
      if (!problem.has(id)) continue;
      State::Slot& s = state->slots[i];
      s.declared = true;
      s.output = is_output(id, problem.direction());
      s.desc = *problem.tensor(id);
      for (int r = 0; r < s.desc.rank; ++r) {
        if (s.desc.strides[r] < 0) {
          return Status(Code::invalid_argument, tensor_name(id) + " strides[" + std::to_string(r) +
                                                    "] = " + std::to_string(s.desc.strides[r]) +
                                                    ": must not be negative");
        }
      }
      size_t span_bytes = 0;
      if (Status st = span_bytes_checked(id, s.desc, &span_bytes); !st) return st;
      const auto span = static_cast<int64_t>(span_bytes / size_of(s.desc.dtype));
      Result<GuardedBlock> block = GuardedBlock::create(span_bytes, memory, tensor_name(id));
      if (!block) return block.status();
      s.block = std::move(block.value());

      s.addressed.assign(static_cast<size_t>(span), 0);
      for_each_index(s.desc, [&](int64_t, int64_t offset, const auto&) {
        s.aliased |= s.addressed[offset] != 0;
        s.addressed[offset] = 1;
      });
      // Canaries around, poison over the whole span: gaps keep it for good, addressed
      // elements until an upload (inputs) or a run (outputs) replaces it.
      s.image.assign(s.block.total_bytes(), GuardedBlock::kCanaryByte);
      const size_t esize = size_of(s.desc.dtype);
      const uint32_t poison = poison_bits(s.desc.dtype);
      for (int64_t e = 0; e < span; ++e) store_bits(state->element(s, e), esize, poison);
      if (Status st = s.block.write_all(s.image.data()); !st) return st;
    }
  } catch (const std::bad_alloc&) {
    return Status(Code::internal, "buffers: out of host memory for the tensors' images");
  }
  TensorBuffers b;
  b.state_ = std::move(state);
  return b;
}

Status TensorBuffers::upload(TensorId id, const HostArray& array) {
  if (!state_ || !state_->slots[index_of(id)].declared) {
    return Status(Code::invalid_argument,
                  tensor_name(id) + ": upload, but the problem does not declare it");
  }
  State::Slot& s = state_->slots[index_of(id)];
  const TensorDesc& d = s.desc;
  bool same = static_cast<int>(array.shape.size()) == d.rank;
  for (int i = 0; same && i < d.rank; ++i) same = array.shape[i] == d.dims[i];
  if (!same) {
    return Status(Code::invalid_argument,
                  tensor_name(id) + ": upload shape " +
                      dims_text(array.shape.data(), static_cast<int>(array.shape.size())) +
                      " must equal the tensor's dims " + dims_text(d.dims.data(), d.rank));
  }
  if (static_cast<int64_t>(array.data.size()) != d.numel()) {
    return Status(Code::invalid_argument, tensor_name(id) + ": upload array holds " +
                                              std::to_string(array.data.size()) +
                                              " values, needs " + std::to_string(d.numel()));
  }
  const size_t esize = size_of(d.dtype);
  // Built into a copy so that a refused upload leaves the buffers as they were.
  std::vector<unsigned char> image = s.image;
  std::vector<int64_t> first_index;  // per element: the first logical index that wrote it
  if (s.aliased) first_index.assign(s.addressed.size(), -1);
  std::array<int64_t, TensorDesc::kMaxRank> first_idx_of_conflict{};
  Status error;
  unsigned char* base = image.data() + GuardedBlock::kCanaryBytes;
  for_each_index(d, [&](int64_t linear, int64_t offset, const auto& idx) {
    if (!error.ok()) return;
    const float x = array.data[static_cast<size_t>(linear)];
    unsigned char* p = base + offset * esize;
    uint64_t bits = 0;
    if (d.dtype == DType::i64) {
      if (!(x == std::floor(x)) || x < -9.2233720368547758e18f || x >= 9.2233720368547758e18f) {
        error =
            Status(Code::invalid_argument, tensor_name(id) + " element " + index_text(idx, d.rank) +
                                               " = " + num_text(x) + ": must be an integer (i64)");
        return;
      }
      const int64_t v = static_cast<int64_t>(x);
      std::memcpy(&bits, &v, 8);
    } else if (d.dtype == DType::i32) {
      if (!(x == std::floor(x)) || x < -2147483648.0f || x >= 2147483648.0f) {
        error =
            Status(Code::invalid_argument, tensor_name(id) + " element " + index_text(idx, d.rank) +
                                               " = " + num_text(x) + ": must be an integer (i32)");
        return;
      }
      const int32_t v = static_cast<int32_t>(x);
      std::memcpy(&bits, &v, 4);
    } else {
      unsigned char tmp[4];
      detail::store_from_float(tmp, 0, d.dtype, x);
      bits = load_bits(tmp, esize);
    }
    if (s.aliased) {
      int64_t& first = first_index[offset];
      if (first >= 0 && load_bits(p, esize) != bits) {
        // Recover the first writer's index from its linear position.
        int64_t rest = first;
        for (int i = d.rank - 1; i >= 0; --i) {
          first_idx_of_conflict[i] = rest % d.dims[i];
          rest /= d.dims[i];
        }
        error = Status(
            Code::invalid_argument,
            tensor_name(id) + ": elements " + index_text(first_idx_of_conflict, d.rank) + " and " +
                index_text(idx, d.rank) +
                " share one memory element (zero stride) but hold values that differ once "
                "rounded to " +
                to_string(d.dtype) + " (" + num_text(array.data[static_cast<size_t>(first)]) +
                " and " + num_text(x) + ")");
        return;
      }
      if (first < 0) first = linear;
    }
    store_bits(p, esize, bits);
  });
  if (!error.ok()) return error;
  if (Status st = s.block.write_all(image.data()); !st) return st;
  s.image = std::move(image);
  return Status();
}

Status TensorBuffers::poison_outputs() {
  if (!state_) return Status();
  for (int i = 0; i < kTensorCount; ++i) {
    State::Slot& s = state_->slots[i];
    if (!s.declared || !s.output) continue;
    const size_t esize = size_of(s.desc.dtype);
    const uint32_t poison = poison_bits(s.desc.dtype);
    for_each_index(s.desc, [&](int64_t, int64_t offset, const auto&) {
      store_bits(state_->element(s, offset), esize, poison);
    });
    if (Status st = s.block.write_all(s.image.data()); !st) return st;
  }
  return Status();
}

Arguments TensorBuffers::arguments() const {
  Arguments args;
  if (!state_) return args;
  for (int i = 0; i < kTensorCount; ++i) {
    if (state_->slots[i].declared) args.ptr[i] = state_->slots[i].block.payload();
  }
  return args;
}

Result<HostArray> TensorBuffers::download(TensorId id) const {
  if (!state_ || !state_->slots[index_of(id)].declared) {
    return Status(Code::invalid_argument,
                  tensor_name(id) + ": download, but the problem does not declare it");
  }
  const State::Slot& s = state_->slots[index_of(id)];
  std::vector<unsigned char> image(s.block.total_bytes());
  if (Status st = s.block.read_all(image.data()); !st) return st;
  HostArray out;
  out.shape.assign(s.desc.dims.begin(), s.desc.dims.begin() + s.desc.rank);
  out.data.resize(static_cast<size_t>(s.desc.numel()));
  const unsigned char* base = image.data() + GuardedBlock::kCanaryBytes;
  for_each_index(s.desc, [&](int64_t linear, int64_t offset, const auto&) {
    out.data[static_cast<size_t>(linear)] = detail::load_as_float(base, offset, s.desc.dtype);
  });
  return out;
}

Status TensorBuffers::check_guards() const {
  if (!state_) return Status();
  std::string errors;
  for (int i = 0; i < kTensorCount; ++i) {
    const State::Slot& s = state_->slots[i];
    if (!s.declared) continue;
    const auto id = static_cast<TensorId>(i);
    std::vector<unsigned char> image(s.block.total_bytes());
    if (Status st = s.block.read_all(image.data()); !st) return st;
    std::string msg;
    if (Status st = s.block.check_canaries(image.data()); !st) msg = st.message();

    // Gaps must still hold the poison; an input's addressed elements must hold what was
    // uploaded (an engine never writes its inputs).
    const size_t esize = size_of(s.desc.dtype);
    const uint32_t poison = poison_bits(s.desc.dtype);
    const unsigned char* got = image.data() + GuardedBlock::kCanaryBytes;
    const unsigned char* want = s.image.data() + GuardedBlock::kCanaryBytes;
    int64_t gap_damage = 0, input_damage = 0;
    int64_t first_gap = -1, first_input = -1;
    for (size_t e = 0; e < s.addressed.size(); ++e) {
      const unsigned char* p = got + e * esize;
      if (!s.addressed[e]) {
        if (load_bits(p, esize) != poison && gap_damage++ == 0) first_gap = static_cast<int64_t>(e);
      } else if (!s.output && std::memcmp(p, want + e * esize, esize) != 0) {
        if (input_damage++ == 0) first_input = static_cast<int64_t>(e);
      }
    }
    auto add = [&](const std::string& m) {
      msg += (msg.empty() ? tensor_name(id) + ": " : "; ") + m;
    };
    if (gap_damage > 0) {
      add("stride gap damaged at byte offset " + std::to_string(first_gap * esize) + " (element " +
          std::to_string(first_gap) +
          "): " + hex_bits(load_bits(got + first_gap * esize, esize), esize) +
          ", expected the poison " + hex_bits(poison, esize) + " (" + std::to_string(gap_damage) +
          " gap elements damaged in all)");
    }
    if (input_damage > 0) {
      add("input overwritten at byte offset " + std::to_string(first_input * esize) + " (element " +
          std::to_string(first_input) +
          "): " + hex_bits(load_bits(got + first_input * esize, esize), esize) + ", uploaded " +
          hex_bits(load_bits(want + first_input * esize, esize), esize) + " (" +
          std::to_string(input_damage) + " elements changed in all)");
    }
    if (!msg.empty()) errors += (errors.empty() ? "" : "\n") + msg;
  }
  if (errors.empty()) return Status();
  return Status(Code::internal, errors);
}

Memory TensorBuffers::memory() const {
  return state_ ? state_->memory : Memory::host;
}

const Problem& TensorBuffers::problem() const {
  static const Problem empty = Problem::forward(Shape{}, DType::bf16);
  return state_ ? state_->problem : empty;
}

}  // namespace floe::tool

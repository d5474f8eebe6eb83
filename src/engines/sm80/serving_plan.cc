#include "engines/sm80/serving_plan.h"

#include "engines/sm80/sm80_rules.h"

namespace floe::detail::sm80 {
namespace {

bool ragged(const Facts& f, TensorId id) {
  switch (id) {
    case TensorId::q:
    case TensorId::o:
    case TensorId::stats:
    case TensorId::d_o:
    case TensorId::dq:
      return f.ragged_q;
    case TensorId::k:
    case TensorId::v:
    case TensorId::dk:
    case TensorId::dv:
      return f.ragged_kv;
    default:
      return false;
  }
}

bool paged(const Facts& f, TensorId id) {
  return f.paged_kv && (id == TensorId::k || id == TensorId::v);
}

// The dim whose stride steps from one row of a tile to the next: a ragged tensor's token dim
// ([T, H, D]), a page's row dim ([N, P, H, D]), else the sequence dim ([B, H, S, D]).
int row_dim(const Facts& f, TensorId id) {
  return ragged(f, id) ? 0 : paged(f, id) ? 1 : 2;
}

std::string check_operand_rows(const Facts& f, TensorId id, int block_rows) {
  if (!f.has(id)) return "";
  if (!ragged(f, id) && !paged(f, id))
    return tensor_core::check_operand(kEngine, f, id, block_rows);
  const TensorDesc& d = f.t(id);
  const int inner = d.rank - 1;
  const std::string name = tensor_core::tensor_name(id);
  const char* layout = paged(f, id) ? " (paged)" : " (ragged)";
  if (d.strides[inner] != 1) {
    return name + layout + " strides[" + std::to_string(inner) +
           "] = " + std::to_string(d.strides[inner]) + ": " + kEngine +
           " needs a unit innermost stride";
  }
  for (int i = 0; i < inner; ++i) {
    if (d.dims[i] > 1 && d.strides[i] % 8 != 0) {
      return name + layout + " strides[" + std::to_string(i) +
             "] = " + std::to_string(d.strides[i]) + ": " + kEngine +
             " needs 16-byte-aligned rows (every outer stride a multiple of 8 elements)";
    }
  }
  const int r = row_dim(f, id);
  // A paged tile is one base plus 32-bit row offsets only when a page holds whole tiles
  // (ServingRows::tile_in_page); otherwise each row has its own 64-bit address, a 32-bit row
  // stride times the row in its page.
  if (paged(f, id) && f.page_size % block_rows != 0) {
    if (d.dims[r] > 1 && d.strides[r] > kInt32Max) {
      return name + layout + " strides[1] = " + std::to_string(d.strides[1]) + ": " + kEngine +
             " needs a page's row stride below 2^31";
    }
    return "";
  }
  if (d.dims[r] > 1 && static_cast<int64_t>(block_rows) * d.strides[r] > kInt32Max) {
    return name + layout + " strides[" + std::to_string(r) + "] = " + std::to_string(d.strides[r]) +
           ": " + kEngine + " addresses " + std::to_string(block_rows) +
           " rows at a time with 32-bit offsets; " + std::to_string(block_rows) + " x strides[" +
           std::to_string(r) + "] must stay below 2^31";
  }
  return "";
}

}  // namespace

std::string check_serving_operands(const Facts& f, std::initializer_list<TensorId> query_side,
                                   int block_m, std::initializer_list<TensorId> key_side,
                                   int block_n, std::initializer_list<TensorId> biases) {
  for (TensorId id : query_side) {
    if (std::string why = check_operand_rows(f, id, block_m); !why.empty()) return why;
  }
  for (TensorId id : key_side) {
    if (std::string why = check_operand_rows(f, id, block_n); !why.empty()) return why;
  }
  for (TensorId id : biases) {
    if (std::string why = tensor_core::check_bias(kEngine, f, id); !why.empty()) return why;
  }
  return "";
}

kernels::Strides3 serving_strides_of(const Facts& f, TensorId id) {
  if (!f.has(id)) return {};
  const TensorDesc& d = f.t(id);
  if (ragged(f, id)) return kernels::Strides3{0, d.strides[1], d.strides[0]};
  if (paged(f, id)) return kernels::Strides3{0, d.strides[2], d.strides[1]};
  return strides_of(f, id);
}

}  // namespace floe::detail::sm80

#include "engines/decode/decode_engine.h"

#include <memory>
#include <string>

#include "engines/decode/decode_kernels.h"
#include "engines/decode/decode_plan.h"

namespace floe::detail {
namespace {

class DecodeLaunchPlan final : public LaunchPlan {
 public:
  DecodeLaunchPlan(const decode::Params& params, bool bf16) : params_(params), bf16_(bf16) {}

  Status launch(const Facts& facts, const Arguments& args, const Workspace& ws,
                Stream stream) const override {
    (void)facts;
    decode::Params p = params_;
    p.q = args.get(TensorId::q);
    p.k = args.get(TensorId::k);
    p.v = args.get(TensorId::v);
    p.o = args.get(TensorId::o);
    p.stats = static_cast<float*>(args.get(TensorId::stats));
    p.sink = static_cast<const float*>(args.get(TensorId::sink));
    p.lens.q = static_cast<const int32_t*>(args.get(TensorId::seq_len_q));
    p.lens.kv = static_cast<const int32_t*>(args.get(TensorId::seq_len_kv));
    p.rq.offsets = args.get(TensorId::offsets_q);
    p.rq.seq_len = p.lens.q;
    p.rkv.offsets = args.get(TensorId::offsets_kv);
    p.rkv.seq_len = p.lens.kv;
    p.pages.table = static_cast<const int32_t*>(args.get(TensorId::block_table));
    if (decode::uses_partials(p)) {
      p.partial_o = ws.carve<float>(decode::kPartialOChunk);
      p.partial_lse = ws.carve<float>(decode::kPartialLseChunk);
      p.arrivals = ws.carve<int32_t>(decode::kArrivalsChunk);
      if (p.partial_o == nullptr || p.partial_lse == nullptr || p.arrivals == nullptr) {
        return Status(Code::internal, "decode: the plan has no split partial chunks");
      }
    }
    return decode::launch(p, bf16_, stream);
  }

  // K and V rows move in 16-byte chunks.
  size_t pointer_alignment(TensorId id, const Facts& facts) const override {
    if (id == TensorId::k || id == TensorId::v) return 16;
    return LaunchPlan::pointer_alignment(id, facts);
  }

  std::string describe() const override {
    std::string s = "decode d" + std::to_string(params_.d_qk) + ", " +
                    std::to_string(params_.m_tiles) + " row tile(s) of 16 per kv head, " +
                    std::to_string(params_.stages == 2 ? 2 : (params_.d_qk == 64 ? 4 : 3)) +
                    " stages, ";
    if (params_.split_tokens > 0) {
      s += "splits of " + std::to_string(params_.split_tokens) + " keys (batch-invariant), ";
      return s + "max_splits " + std::to_string(params_.max_splits);
    }
    return s + "max_splits " + std::to_string(params_.max_splits) +
           " at the envelope, splits from the device lengths: " +
           std::to_string(params_.slots - params_.b) + " CTAs a unit, " +
           std::to_string(params_.slots) + " partial rows";
  }

 private:
  decode::Params params_;
  bool bf16_;
};

class DecodeEngine final : public Engine {
 public:
  const char* name() const override { return "decode"; }
  std::string decline_reason(const Facts& facts, const Target& target) const override {
    return decode::decline_reason(facts, target);
  }
  Result<std::unique_ptr<const LaunchPlan>> plan(const Facts& facts, const Target& target,
                                                 WorkspaceLayout& workspace) const override {
    const decode::Params params = decode::make_params(facts, target);
    decode::add_workspace(facts, params, workspace);
    const bool bf16 = facts.dtype == DType::bf16;
    if (target.executable) {
      if (Status st = decode::load_kernels(params, bf16); !st) return st;
    }
    return std::unique_ptr<const LaunchPlan>(std::make_unique<DecodeLaunchPlan>(params, bf16));
  }
};

}  // namespace

const Engine& decode_engine() {
  static const DecodeEngine engine;
  return engine;
}

}  // namespace floe::detail

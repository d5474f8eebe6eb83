#include "plan/select.h"

#include "engines/decode/decode_engine.h"
#include "engines/generic/generic_engine.h"
#include "engines/reference/reference_engine.h"
#include "engines/sm80/sm80_engine.h"
#include "engines/sm90/sm90_engine.h"

namespace floe::detail {

const std::vector<const Engine*>& ranked_engines() {
  // decode first: it declines everything but short query sides, which it serves fastest.
  static const std::vector<const Engine*> engines = {
      &decode_engine(), &sm90_engine(), &sm80_engine(), &generic_engine(), &reference_engine()};
  return engines;
}

Selection select_engine(const Facts& facts, const Target& target, const std::string& pinned) {
  Selection sel;
  for (const Engine* e : ranked_engines()) {
    EngineVerdict v;
    v.engine = e->name();
    if (pinned != "auto" && pinned != v.engine) {
      v.reason = "not the pinned engine (" + pinned + ")";
    } else {
      v.reason = e->decline_reason(facts, target);
    }
    v.accepted = v.reason.empty();
    if (v.accepted && sel.engine == nullptr) sel.engine = e;
    sel.verdicts.push_back(std::move(v));
  }
  return sel;
}

}  // namespace floe::detail

// The naive formulation of DESIGN §2, written independently of the reference engine: dense
// fp64 score and probability matrices per (batch, head), its own masking and padding, on
// logical C-order arrays. The tests hold the engine to it, and it to finite differences.
#pragma once

#include <cstdint>
#include <optional>
#include <vector>

namespace floe::reftest {

// A problem in logical terms.
struct Spec {
  int64_t b = 1, h_q = 1, h_kv = 1, s_q = 1, s_kv = 1, d_qk = 8, d_v = 8;
  std::optional<double> scale;  // absent: 1/sqrt(d_qk)
  std::optional<double> softcap;
  std::optional<int64_t> left, right;
  bool bottom_right = false;
  int64_t bias_b = 0, bias_h = 0;  // bias dims [bias_b, bias_h, s_q, s_kv]; 0: no bias
  bool sink = false;
  std::vector<int> seq_q, seq_kv;  // actual lengths per batch; empty: none declared

  bool has_bias() const { return bias_b > 0; }
  double resolved_scale() const;
};

// Logical tensors, dense C-order, in fp64. Sizes follow the Spec (see sizes()).
struct Tensors {
  std::vector<double> q, k, v, bias, sink;  // inputs
  std::vector<double> o, lse;               // forward outputs; backward inputs
  std::vector<double> d_o;                  // backward input
  std::vector<double> dq, dk, dv, dbias, dsink;
};

// Resizes every tensor of t that the spec uses to its logical size (values are kept or zero).
void size_tensors(const Spec& s, Tensors& t);

// o and lse from q, k, v, bias, sink.
void naive_forward(const Spec& s, Tensors& t);
// dq, dk, dv, dbias, dsink from q, k, v, bias, sink, o, lse (as given) and d_o.
void naive_backward(const Spec& s, Tensors& t);
// sum(d_o * o) after a naive forward of t: the loss whose gradient naive_backward gives when o
// and lse are exact.
double naive_loss(const Spec& s, const Tensors& t);

}  // namespace floe::reftest

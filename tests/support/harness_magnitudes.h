// The scales of cancellation noise in the backward's dq, dk and dbias.
//
// dS = P (dP - Delta) subtracts two nearly equal fp32 dot products: where one key takes all of
// a row's weight, dP = Delta exactly and the reference's dS, hence its dq row, is 0, while an
// fp32 engine's is rounding noise of order 2^-24 * |dO| (|v| + |O|). No relative or row-scaled
// tolerance admits that noise around an exact 0; an absolute one in units of the terms that
// cancelled does. For each output element, a bound on the sum of |terms| behind its noise:
//
//   dq[b,h,i,d]    |scale| * |dO_i| * (max_j |v_j| + |O_i|) * max_j |k_jd|       (sum_j P_ij <= 1)
//   dk[b,g,j,d]    |scale| * max_i |q_id| * sum_i P_ij |dO_i| (max |v| + |O_i|)   (over the group)
//   dbias[.,.,i,j] sum over the broadcast dims of |dO_i| (|v_j| + |O_i|)         (P_ij <= 1)
//
// with 2-norms over the head dim, only valid rows (i < seq_len_q, finite stats) and keys
// (j < seq_len_kv), and 0 elsewhere, so that padding must still be exactly 0. dk's column
// weights sum_i P_ij w_i come from one more run of the reference backward with dO replaced by
// w_i = |dO_i| (max |v| + |O_i|) in every column: its dv is exactly that weighted sum.
#pragma once

#include "case_folder.h"
#include "floe/status.h"

namespace floe::test {

// The arrays above, by output name ("dq", "dk", "dbias"), for a backward case; empty for a
// forward one.
Result<tool::ArrayMap> cancellation_magnitudes(const tool::Case& c);

}  // namespace floe::test

// The band mask (band_mask.h) and padding, seen by one query tile: which key tiles it must visit,
// which of those are fully visible to every row (no per-element mask), and the per-row visible
// key interval used on the boundary tiles. Lengths are the batch's actual ones, read on the
// device (P6).
#pragma once

#include <climits>
#include <cstdint>

#include "common/host_device.h"
#include "kernels/band_mask.h"

// FLOE_HD: forced-inline device functions in CUDA builds, plain inline host functions where a
// C++ compiler includes this header (tests/cpu/band_tiles_test.cc).

namespace floe::kernels {

struct KeyTiles {
  int begin = 0, end = 0;            // key tiles [begin, end) hold every visible key of the tile
  int full_begin = 0, full_end = 0;  // tiles in [full_begin, full_end) are visible to every row
  // On the other tiles, key j is visible to query i iff diag_lo <= j - i <= diag_hi and j < skv_b:
  // the band's bounds as distances from the diagonal, clamped to int (j - i always fits).
  int diag_lo = INT32_MIN, diag_hi = INT32_MAX;
  FLOE_HD bool empty() const { return end <= begin; }
  FLOE_HD bool needs_mask(int n) const { return n < full_begin || n >= full_end; }
};

// A band of negative width (left + right < 0) shows no key to any query. Both tile ranges
// below return nothing for it; without this the two would disagree on some boundary tiles
// (each side sees a non-empty union of empty per-row intervals).
FLOE_HD bool empty_band(const BandMask& band, bool has_mask) {
  return has_mask && band.has_left && band.has_right && band.left + band.right < 0;
}

// Visible keys of query row i, clipped to [0, skv_b): [lo, hi] (empty when hi < lo).
struct RowKeys {
  int lo, hi;
};

FLOE_HD RowKeys row_keys(const BandMask& band, bool has_mask, int64_t i, int64_t off, int skv_b) {
  int64_t lo = 0, hi = skv_b - 1;
  if (has_mask) {
    lo = band.first_key(i, off);
    hi = band.last_key(i, off);
    lo = lo < 0 ? 0 : lo;
    hi = hi > skv_b - 1 ? skv_b - 1 : hi;
    if (lo > skv_b) lo = skv_b;  // keep both in int range
    if (hi < -1) hi = -1;
  }
  return RowKeys{static_cast<int>(lo), static_cast<int>(hi)};
}

// Rows [row_first, row_last] (actual rows, row_last < sq_b) of one query tile; key tiles of
// block_n keys.
FLOE_HD KeyTiles key_tiles(const BandMask& band, bool has_mask, int row_first, int row_last,
                           int sq_b, int skv_b, int block_n) {
  KeyTiles kt;
  if (empty_band(band, has_mask)) return kt;
  const int64_t off = has_mask ? band.offset(sq_b, skv_b) : 0;
  if (has_mask) {
    auto clamp32 = [](int64_t x) {
      return static_cast<int>(x < INT32_MIN ? INT32_MIN : (x > INT32_MAX ? INT32_MAX : x));
    };
    if (band.has_left) kt.diag_lo = clamp32(off - band.left);
    if (band.has_right) kt.diag_hi = clamp32(off + band.right);
  }
  // The union of the rows' intervals: the first row starts lowest, the last row ends highest.
  const RowKeys first = row_keys(band, has_mask, row_first, off, skv_b);
  const RowKeys last = row_keys(band, has_mask, row_last, off, skv_b);
  const int lo = first.lo, hi = last.hi;
  if (hi < lo) return kt;  // no row sees any key
  kt.begin = lo / block_n;
  kt.end = hi / block_n + 1;
  // The intersection: keys every row sees (the last row starts highest, the first ends lowest).
  const int ilo = last.lo, ihi = first.hi;
  int fb = (ilo + block_n - 1) / block_n;
  int fe = ihi >= ilo ? (ihi + 1) / block_n : 0;
  // begin <= full_begin <= full_end <= end (a band of negative width leaves no full tile).
  fb = fb < kt.begin ? kt.begin : (fb > kt.end ? kt.end : fb);
  fe = fe < fb ? fb : (fe > kt.end ? kt.end : fe);
  kt.full_begin = fb;
  kt.full_end = fe;
  return kt;
}

// For a backward that adds a query tile's dQ from its visiting key tiles in descending order (the
// sm90 deterministic mode): how many of the tile's visitors lie above key tile n_block, itself a
// visitor. The visitors are key_tiles()'s [begin, end), and end - 1 holds the last row's last
// visible key (the rows' intervals only move up), so only the tile's last actual row (row_last <
// sq_b) is needed.
FLOE_HD int key_tiles_above(const BandMask& band, bool has_mask, int row_last, int n_block,
                            int sq_b, int skv_b, int block_n) {
  const int64_t off = has_mask ? band.offset(sq_b, skv_b) : 0;
  return row_keys(band, has_mask, row_last, off, skv_b).hi / block_n - n_block;
}

// The transposed question, for a backward CTA that owns one key tile: which query tiles hold a
// row that sees one of its keys [key_first, key_last] (actual keys, key_last < skv_b). Query tile
// m is in the range exactly when key_tiles() of m holds this key tile, so the two sides always
// agree on who visits whom (the deterministic dQ order relies on it). mask_diag_lo/hi are the
// band's bounds as distances from the diagonal, as in KeyTiles.
struct QueryTiles {
  int begin = 0, end = 0;  // query tiles [begin, end)
  int diag_lo = INT32_MIN, diag_hi = INT32_MAX;
  FLOE_HD bool empty() const { return end <= begin; }
  // Whether query tile m (rows [m0, m0 + block_m)) sees every key of [n0, n0 + block_n) that
  // exists (keys past skv_b always need the mask).
  FLOE_HD bool needs_mask(int m0, int block_m, int n0, int block_n, int skv_b) const {
    return n0 + block_n > skv_b || n0 - (m0 + block_m - 1) < diag_lo ||
           (n0 + block_n - 1) - m0 > diag_hi;
  }
};

FLOE_HD QueryTiles query_tiles(const BandMask& band, bool has_mask, int key_first, int key_last,
                               int sq_b, int skv_b, int block_m) {
  QueryTiles qt;
  if (empty_band(band, has_mask)) return qt;
  int64_t lo = 0, hi = sq_b - 1;
  if (has_mask) {
    const int64_t off = band.offset(sq_b, skv_b);
    auto clamp32 = [](int64_t x) {
      return static_cast<int>(x < INT32_MIN ? INT32_MIN : (x > INT32_MAX ? INT32_MAX : x));
    };
    if (band.has_left) qt.diag_lo = clamp32(off - band.left);
    if (band.has_right) qt.diag_hi = clamp32(off + band.right);
    // Row i sees key j iff j - off - right <= i <= j - off + left.
    if (band.has_right) lo = key_first - off - band.right;
    if (band.has_left) hi = key_last - off + band.left;
    lo = lo < 0 ? 0 : lo;
    hi = hi > sq_b - 1 ? sq_b - 1 : hi;
  }
  if (hi < lo || sq_b <= 0) return qt;
  qt.begin = static_cast<int>(lo / block_m);
  qt.end = static_cast<int>(hi / block_m) + 1;
  return qt;
}

}  // namespace floe::kernels

#include "eval/coco_eval.h"

#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstdio>
#include <exception>
#include <limits>
#include <mutex>
#include <numeric>
#include <thread>

#include "core/errors.h"

namespace detforge::eval {
namespace {

// np.spacing(1): pycocotools adds it to tp + fp.
constexpr double kEps = std::numeric_limits<double>::epsilon();

// np.linspace(start, stop, num): i * ((stop - start) / (num - 1)) + start, last = stop.
std::vector<double> linspace(double start, double stop, int num) {
  std::vector<double> v(num);
  const double step = (stop - start) / (num - 1);
  for (int i = 0; i < num; ++i) v[i] = static_cast<double>(i) * step + start;
  v[num - 1] = stop;
  return v;
}

std::vector<int64_t> sorted_unique(std::vector<int64_t> v) {
  std::sort(v.begin(), v.end());
  v.erase(std::unique(v.begin(), v.end()), v.end());
  return v;
}

// Index of `id` in sorted `ids`, or -1.
int64_t find_index(const std::vector<int64_t>& ids, int64_t id) {
  auto it = std::lower_bound(ids.begin(), ids.end(), id);
  return (it != ids.end() && *it == id) ? it - ids.begin() : -1;
}

// Runs f(item, worker) for item in [0, n) on `threads` workers pulling items in order.
// The first exception is rethrown after all workers stop.
template <typename F>
void parallel_for(size_t n, int threads, F&& f) {
  const int workers =
      static_cast<int>(std::min<size_t>(std::max(threads, 1), std::max<size_t>(n, 1)));
  std::atomic<size_t> next{0};
  std::exception_ptr error;
  std::mutex error_mutex;
  auto run = [&](int worker) {
    try {
      for (size_t i = next++; i < n; i = next++) f(i, worker);
    } catch (...) {
      std::lock_guard<std::mutex> lock(error_mutex);
      if (!error) error = std::current_exception();
      next = n;
    }
  };
  std::vector<std::thread> pool;
  for (int w = 1; w < workers; ++w) pool.emplace_back(run, w);
  run(0);
  for (auto& t : pool) t.join();
  if (error) std::rethrow_exception(error);
}

// Stable sort of indices by `less` (std::stable_sort semantics) that reuses `buf` instead of
// allocating: insertion sort on runs of 32, then bottom-up merges.
template <typename Less>
void stable_sort_indices(std::vector<int32_t>& v, std::vector<int32_t>& buf, Less less) {
  const size_t n = v.size();
  constexpr size_t kRun = 32;
  for (size_t lo = 0; lo < n; lo += kRun) {
    const size_t hi = std::min(n, lo + kRun);
    for (size_t i = lo + 1; i < hi; ++i) {
      const int32_t x = v[i];
      size_t j = i;
      for (; j > lo && less(x, v[j - 1]); --j) v[j] = v[j - 1];
      v[j] = x;
    }
  }
  if (n <= kRun) return;
  buf.resize(n);
  for (size_t width = kRun; width < n; width *= 2) {
    for (size_t lo = 0; lo < n; lo += 2 * width) {
      const size_t mid = std::min(n, lo + width), hi = std::min(n, lo + 2 * width);
      size_t i = lo, j = mid, o = lo;
      // Ties take the left run first: stable.
      while (i < mid && j < hi) buf[o++] = less(v[j], v[i]) ? v[j++] : v[i++];
      while (i < mid) buf[o++] = v[i++];
      while (j < hi) buf[o++] = v[j++];
    }
    v.swap(buf);
  }
}

// Boxes in the form bbIou (pycocotools maskApi.c) uses, precomputed once.
struct GtBox {
  double x1, y1, x2, y2, box_area, area;
  bool crowd;
  bool id_nonzero;
};
struct DtBox {
  double x1, y1, x2, y2, area, score;
};

// Per-thread state, padded to its own cache lines (workers resize these vectors constantly).
struct alignas(64) MatchScratch {
  std::vector<double> ious;         // [D, G] in GT input order
  std::vector<double> best_iou;     // [D] highest IoU of each detection over the cell's GT
  std::vector<int32_t> candidates;  // detections whose best IoU reaches the lowest threshold
  std::vector<int32_t> order;       // GT order for one area: unignored first (stable)
  std::vector<uint8_t> gt_ignore;
  std::vector<uint8_t> gt_matched;
  std::vector<int32_t> dt_order;
  std::vector<int32_t> sort_buf;
};
struct alignas(64) CurveScratch {
  std::vector<int64_t> tp, fp;
  std::vector<double> rc, pr;  // [T, npig]: recall and precision at each true positive
  std::vector<uint32_t> masks;
  std::vector<int32_t> idx, rank, sort_buf;
  std::vector<double> scores;
};

// Reusable sorted-id lookup: a direct table when ids are dense enough, else binary search.
class IdIndex {
 public:
  explicit IdIndex(const std::vector<int64_t>& sorted_ids) : ids_(sorted_ids) {
    if (ids_.empty()) return;
    lo_ = ids_.front();
    const uint64_t span = static_cast<uint64_t>(ids_.back()) - static_cast<uint64_t>(lo_) + 1;
    if (span <= 4 * ids_.size() + (1u << 20)) {
      table_.assign(span, -1);
      for (size_t i = 0; i < ids_.size(); ++i) table_[ids_[i] - lo_] = static_cast<int32_t>(i);
    }
  }
  int64_t operator()(int64_t id) const {
    if (!table_.empty()) {
      const uint64_t off = static_cast<uint64_t>(id) - static_cast<uint64_t>(lo_);
      return off < table_.size() ? table_[off] : -1;
    }
    return find_index(ids_, id);
  }

 private:
  const std::vector<int64_t>& ids_;
  int64_t lo_ = 0;
  std::vector<int32_t> table_;
};

Params normalized(const Params& in, const GroundTruthSet& gt) {
  Params p = in;
  if (p.image_ids.empty()) p.image_ids = gt.image_ids;
  p.image_ids = sorted_unique(p.image_ids);
  if (p.category_ids.empty()) {
    for (const auto& c : gt.categories) p.category_ids.push_back(c.id);
  }
  p.category_ids = sorted_unique(p.category_ids);
  std::sort(p.max_dets.begin(), p.max_dets.end());
  if (p.iou_thresholds.empty()) throw ConfigError("eval params: iou_thresholds is empty");
  if (p.iou_thresholds.size() > 32) {
    throw ConfigError(str("eval params: at most 32 iou_thresholds, got ", p.iou_thresholds.size()));
  }
  if (p.recall_thresholds.empty()) throw ConfigError("eval params: recall_thresholds is empty");
  if (p.max_dets.empty()) throw ConfigError("eval params: max_dets is empty");
  if (p.max_dets.front() < 0)
    throw ConfigError(str("eval params: max_dets must be >= 0, got ", p.max_dets.front()));
  if (p.area_ranges.empty()) throw ConfigError("eval params: area_ranges is empty");
  for (const auto& r : p.area_ranges) {
    if (!(r.lo <= r.hi))
      throw ConfigError(
          str("eval params: area range '", r.label, "' has lo ", r.lo, " > hi ", r.hi));
  }
  if (p.num_threads <= 0)
    p.num_threads = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  return p;
}

// evaluate() and accumulate() over detections and GT grouped per (image, category) cell in
// compressed rows. Per kept detection and area range it stores two bit masks over the IoU
// thresholds: matched (pycocotools' dtMatches != 0) and ignored (dtIgnore).
class Evaluation {
 public:
  Evaluation(const GroundTruthSet& gt, const std::vector<Detection>& dts, const Params& p)
      : p_(p),
        I_(p.image_ids.size()),
        K_(p.category_ids.size()),
        T_(p.iou_thresholds.size()),
        A_(p.area_ranges.size()),
        M_(p.max_dets.size()),
        all_(T_ == 32 ? ~0u : (1u << T_) - 1) {
    Ke_ = p_.use_cats ? K_ : 1;
    max_det_ = p_.max_dets.back();
    min_thr_ = 1;
    for (double t : p_.iou_thresholds) min_thr_ = std::min(min_thr_, std::min(t, 1 - 1e-10));
    group(gt, dts);
  }

  Accumulated run() {
    match_all();
    return accumulate_all();
  }

 private:
  // Cell c = image * K + category (image-major, so that one image's categories are adjacent,
  // which is what pooling categories without use_cats needs). Input order is kept in a cell.
  void group(const GroundTruthSet& gt, const std::vector<Detection>& dts) {
    const size_t cells = I_ * K_;
    const IdIndex image_index(p_.image_ids), cat_index(p_.category_ids);
    std::vector<int64_t> gt_cell(gt.annotations.size(), -1), dt_cell(dts.size(), -1);
    gt_start_.assign(cells + 1, 0);
    dt_start_.assign(cells + 1, 0);
    for (size_t j = 0; j < gt.annotations.size(); ++j) {
      const auto& a = gt.annotations[j];
      const int64_t i = image_index(a.image_id), k = cat_index(a.category_id);
      if (i < 0 || k < 0) continue;
      gt_cell[j] = i * K_ + k;
      ++gt_start_[gt_cell[j] + 1];
    }
    for (size_t j = 0; j < dts.size(); ++j) {
      const auto& d = dts[j];
      const int64_t i = image_index(d.image_id), k = cat_index(d.category_id);
      if (i < 0 || k < 0) continue;
      dt_cell[j] = i * K_ + k;
      ++dt_start_[dt_cell[j] + 1];
    }
    std::partial_sum(gt_start_.begin(), gt_start_.end(), gt_start_.begin());
    std::partial_sum(dt_start_.begin(), dt_start_.end(), dt_start_.begin());
    gts_.resize(gt_start_.back());
    dts_.resize(dt_start_.back());
    std::vector<int64_t> fill(gt_start_.begin(), gt_start_.end() - 1);
    for (size_t j = 0; j < gt.annotations.size(); ++j) {
      if (gt_cell[j] < 0) continue;
      const auto& a = gt.annotations[j];
      gts_[fill[gt_cell[j]]++] =
          GtBox{a.x, a.y, a.x + a.w, a.y + a.h, a.w * a.h, a.area, a.iscrowd, a.id != 0};
    }
    fill.assign(dt_start_.begin(), dt_start_.end() - 1);
    for (size_t j = 0; j < dts.size(); ++j) {
      if (dt_cell[j] < 0) continue;
      const auto& d = dts[j];
      dts_[fill[dt_cell[j]]++] = DtBox{d.x, d.y, d.x + d.w, d.y + d.h, d.w * d.h, d.score};
    }
  }

  // Evaluation cell e = k * I + i (category-major: accumulate reads one category's images in
  // order). Its GT and detections are the contiguous ranges below.
  std::pair<int64_t, int64_t> gt_range(int64_t k, int64_t i) const {
    return p_.use_cats ? std::make_pair(gt_start_[i * K_ + k], gt_start_[i * K_ + k + 1])
                       : std::make_pair(gt_start_[i * K_], gt_start_[(i + 1) * K_]);
  }
  std::pair<int64_t, int64_t> dt_range(int64_t k, int64_t i) const {
    return p_.use_cats ? std::make_pair(dt_start_[i * K_ + k], dt_start_[i * K_ + k + 1])
                       : std::make_pair(dt_start_[i * K_], dt_start_[(i + 1) * K_]);
  }

  void match_all() {
    // Kept detections per evaluation cell: the best max_dets.back() by score.
    kept_start_.assign(Ke_ * I_ + 1, 0);
    for (size_t k = 0; k < Ke_; ++k) {
      for (size_t i = 0; i < I_; ++i) {
        const auto [b, e] = dt_range(k, i);
        kept_start_[k * I_ + i + 1] = std::min<int64_t>(e - b, max_det_);
      }
    }
    std::partial_sum(kept_start_.begin(), kept_start_.end(), kept_start_.begin());
    const size_t kept = kept_start_.back();
    kept_score_.resize(kept);
    kept_rank_.resize(kept);
    matched_.resize(kept * A_);
    ignored_.resize(kept * A_);
    npig_.assign(Ke_ * I_ * A_, 0);

    constexpr size_t kBlock = 64;
    const size_t blocks = (I_ + kBlock - 1) / kBlock;
    std::vector<MatchScratch> scratch(p_.num_threads);
    parallel_for(Ke_ * blocks, p_.num_threads, [&](size_t item, int worker) {
      const size_t k = item / blocks, b = item % blocks;
      for (size_t i = b * kBlock; i < std::min(I_, (b + 1) * kBlock); ++i)
        match_cell(k, i, scratch[worker]);
    });
  }

  void match_cell(size_t k, size_t i, MatchScratch& s) {
    const auto [gb, ge] = gt_range(k, i);
    const auto [db, de] = dt_range(k, i);
    const int64_t G = ge - gb;
    const size_t e = k * I_ + i;
    const int64_t out = kept_start_[e], D = kept_start_[e + 1] - out;
    if (G == 0 && D == 0) return;
    // Stable sort by descending score: np.argsort(-score, kind='mergesort').
    s.dt_order.resize(de - db);
    std::iota(s.dt_order.begin(), s.dt_order.end(), 0);
    stable_sort_indices(s.dt_order, s.sort_buf, [&, first = db](int32_t a, int32_t b) {
      return dts_[first + a].score > dts_[first + b].score;
    });
    for (int64_t d = 0; d < D; ++d) {
      kept_score_[out + d] = dts_[db + s.dt_order[d]].score;
      kept_rank_[out + d] = static_cast<int32_t>(d);
    }
    // IoU exactly as bbIou in pycocotools' maskApi.c (same operations, same order).
    s.ious.assign(D * G, 0.0);
    s.candidates.clear();
    for (int64_t d = 0; d < D; ++d) {
      const DtBox& q = dts_[db + s.dt_order[d]];
      double best = -1;
      for (int64_t g = 0; g < G; ++g) {
        const GtBox& r = gts_[gb + g];
        const double w = std::fmin(q.x2, r.x2) - std::fmax(q.x1, r.x1);
        double iou = 0;
        if (w > 0) {
          const double h = std::fmin(q.y2, r.y2) - std::fmax(q.y1, r.y1);
          if (h > 0) {
            const double inter = w * h;
            const double uni = r.crowd ? q.area : q.area + r.box_area - inter;
            iou = inter / uni;
          }
        }
        s.ious[d * G + g] = iou;
        best = std::max(best, iou);
      }
      // A match needs IoU >= threshold: below the lowest one on every GT, none is possible.
      if (G > 0 && best >= min_thr_) s.candidates.push_back(static_cast<int32_t>(d));
    }
    s.gt_ignore.resize(G);
    s.gt_matched.resize(G);
    s.order.resize(G);
    for (size_t a = 0; a < A_; ++a) {
      const AreaRange& rng = p_.area_ranges[a];
      int64_t n_unignored = 0;
      for (int64_t g = 0; g < G; ++g) {
        const GtBox& r = gts_[gb + g];
        s.gt_ignore[g] = r.crowd || r.area < rng.lo || r.area > rng.hi;
        if (!s.gt_ignore[g]) s.order[n_unignored++] = static_cast<int32_t>(g);
      }
      npig_[e * A_ + a] = n_unignored;
      for (int64_t g = 0, n = n_unignored; g < G; ++g) {
        if (s.gt_ignore[g]) s.order[n++] = static_cast<int32_t>(g);
      }
      uint32_t* matched = &matched_[out * A_];
      uint32_t* ignored = &ignored_[out * A_];
      for (int64_t d = 0; d < D; ++d) {
        matched[d * A_ + a] = 0;
        ignored[d * A_ + a] = 0;
      }
      for (size_t t = 0; t < T_; ++t) {
        std::fill(s.gt_matched.begin(), s.gt_matched.end(), 0);
        const double thr = std::min(p_.iou_thresholds[t], 1 - 1e-10);
        for (int32_t d : s.candidates) {
          const int32_t m = greedy_match(s, gb, G, d, thr);
          if (m < 0) continue;
          s.gt_matched[m] = 1;
          if (gts_[gb + m].id_nonzero) matched[d * A_ + a] |= 1u << t;
          if (s.gt_ignore[m]) ignored[d * A_ + a] |= 1u << t;
        }
      }
      // Unmatched (dtMatches == 0) detections outside the area range are ignored.
      for (int64_t d = 0; d < D; ++d) {
        const double area = dts_[db + s.dt_order[d]].area;
        if (area < rng.lo || area > rng.hi) ignored[d * A_ + a] |= all_ & ~matched[d * A_ + a];
      }
    }
  }

  // pycocotools' evaluateImg inner loop for detection d at threshold thr: GT in s.order
  // (unignored first); returns the matched GT (input index) or -1.
  int32_t greedy_match(const MatchScratch& s, int64_t gb, int64_t G, int64_t d, double thr) const {
    const double* iou_row = s.ious.data() + d * G;
    double best = thr;
    int32_t m = -1;
    for (int64_t o = 0; o < G; ++o) {
      const int32_t g = s.order[o];
      if (s.gt_matched[g] && !gts_[gb + g].crowd) continue;
      // Matched to a regular GT and only ignored GT remain: stop.
      if (m > -1 && !s.gt_ignore[m] && s.gt_ignore[g]) break;
      if (iou_row[g] < best) continue;
      best = iou_row[g];
      m = g;
    }
    return m;
  }

  // Per category: the kept detections of all images in (image, rank) order, stably sorted by
  // descending score (numpy's mergesort of the concatenation over images), then laid out in
  // that order so that each (area, max_dets) pass reads memory sequentially.
  void sort_category(size_t k, CurveScratch& s) {
    const int64_t b = kept_start_[k * I_], n = kept_start_[(k + 1) * I_] - b;
    s.idx.resize(n);
    std::iota(s.idx.begin(), s.idx.end(), 0);
    stable_sort_indices(s.idx, s.sort_buf, [&](int32_t x, int32_t y) {
      return kept_score_[b + x] > kept_score_[b + y];
    });
    for (auto* masks : {&matched_, &ignored_}) {
      s.masks.resize(n * A_);
      for (int64_t j = 0; j < n; ++j)
        std::copy_n(&(*masks)[(b + s.idx[j]) * A_], A_, &s.masks[j * A_]);
      std::copy(s.masks.begin(), s.masks.end(), masks->begin() + b * A_);
    }
    s.rank.resize(n);
    for (int64_t j = 0; j < n; ++j) s.rank[j] = kept_rank_[b + s.idx[j]];
    std::copy(s.rank.begin(), s.rank.end(), kept_rank_.begin() + b);
    if (p_.score_curves) {
      s.scores.resize(n);
      for (int64_t j = 0; j < n; ++j) s.scores[j] = kept_score_[b + s.idx[j]];
      std::copy(s.scores.begin(), s.scores.end(), kept_score_.begin() + b);
    }
  }

  // The detections of category k at IoU threshold 0, area `a`, max_dets `m` in score order.
  ScoreCurve score_curve(size_t k, size_t a, size_t m) const {
    ScoreCurve c;
    c.category_id = p_.category_ids[k];
    for (size_t i = 0; i < I_; ++i) c.num_gt += npig_[(k * I_ + i) * A_ + a];
    const int64_t b = kept_start_[k * I_], e = kept_start_[(k + 1) * I_];
    for (int64_t d = b; d < e; ++d) {
      if (kept_rank_[d] >= p_.max_dets[m] || (ignored_[d * A_ + a] & 1u)) continue;
      c.scores.push_back(kept_score_[d]);
      c.true_positive.push_back(matched_[d * A_ + a] & 1u);
    }
    return c;
  }

  // One (category, area, max_dets) of accumulate(), written to out[T * R] precision and
  // out[T * R + t] recall. pycocotools builds recall and precision at every detection; they
  // change only at true positives (recall rises there; precision only falls or stays between
  // them), so the interpolated precision and its searchsorted lookup over the true-positive
  // entries alone give the same doubles.
  void accumulate_one(size_t k, size_t a, size_t m, CurveScratch& c, double* out) const {
    const int64_t R = p_.recall_thresholds.size();
    int64_t npig = 0;
    for (size_t i = 0; i < I_; ++i) npig += npig_[(k * I_ + i) * A_ + a];
    if (npig == 0) return;  // stays -1
    const int64_t b = kept_start_[k * I_], e = kept_start_[(k + 1) * I_];
    c.tp.assign(T_, 0);
    c.fp.assign(T_, 0);
    c.rc.resize(T_ * npig);
    c.pr.resize(T_ * npig);
    int64_t* tp_n = c.tp.data();
    int64_t* fp_n = c.fp.data();
    double* rcs = c.rc.data();
    double* prs = c.pr.data();
    const int max_det = p_.max_dets[m];
    const double n_gt = static_cast<double>(npig);
    int64_t nd = 0, fp_all = 0;  // fp_all: false positives at every threshold, kept apart
    for (int64_t d = b; d < e; ++d) {
      if (kept_rank_[d] >= max_det) continue;
      ++nd;
      const uint32_t mt = matched_[d * A_ + a], ig = ignored_[d * A_ + a];
      const uint32_t tp_bits = mt & ~ig, fp_bits = ~mt & ~ig & all_;
      if (tp_bits == 0) {
        if (fp_bits == all_) {
          ++fp_all;
        } else if (fp_bits != 0) {
          for (size_t t = 0; t < T_; ++t) fp_n[t] += (fp_bits >> t) & 1u;
        }
        continue;
      }
      for (size_t t = 0; t < T_; ++t) {
        if ((fp_bits >> t) & 1u) {
          ++fp_n[t];
        } else if ((tp_bits >> t) & 1u) {
          const int64_t i = tp_n[t]++;
          const double tp = static_cast<double>(i + 1), fp = static_cast<double>(fp_n[t] + fp_all);
          rcs[t * npig + i] = tp / n_gt;
          prs[t * npig + i] = tp / (fp + tp + kEps);
        }
      }
    }
    for (size_t t = 0; t < T_; ++t) {
      const int64_t n = tp_n[t];
      double* rc = rcs + t * npig;
      double* pr = prs + t * npig;
      out[T_ * R + t] = nd ? static_cast<double>(n) / n_gt : 0.0;
      for (int64_t i = n; i-- > 1;) {
        if (pr[i] > pr[i - 1]) pr[i - 1] = pr[i];
      }
      for (int64_t r = 0; r < R; ++r) {
        const int64_t idx = std::lower_bound(rc, rc + n, p_.recall_thresholds[r]) - rc;
        // pycocotools stops at the first recall point past the curve (its try/except); the
        // rest keep their 0.
        if (idx >= n) {
          std::fill(out + t * R + r, out + (t + 1) * R, 0.0);
          break;
        }
        out[t * R + r] = pr[idx];
      }
    }
  }

  Accumulated accumulate_all() {
    Accumulated acc;
    acc.T = T_;
    acc.R = p_.recall_thresholds.size();
    acc.K = Ke_;
    acc.A = A_;
    acc.M = M_;
    std::vector<CurveScratch> scratch(p_.num_threads);
    parallel_for(Ke_, p_.num_threads, [&](size_t k, int w) { sort_category(k, scratch[w]); });
    // Each (k, a, m) fills its own block [T * R precision, T recall]; transposed below into
    // pycocotools' layout (writing that directly would interleave the workers' stores).
    const size_t block = T_ * acc.R + T_, items = Ke_ * A_ * M_;
    std::vector<double> blocks(items * block, -1.0);
    parallel_for(items, p_.num_threads, [&](size_t item, int worker) {
      accumulate_one(item / (A_ * M_), (item / M_) % A_, item % M_, scratch[worker],
                     &blocks[item * block]);
    });
    acc.precision.resize(acc.T * acc.R * acc.K * acc.A * acc.M);
    acc.recall.resize(acc.T * acc.K * acc.A * acc.M);
    const size_t kam = Ke_ * A_ * M_;
    for (size_t item = 0; item < items; ++item) {
      const double* in = &blocks[item * block];
      for (size_t t = 0; t < T_; ++t) {
        for (int64_t r = 0; r < acc.R; ++r)
          acc.precision[(t * acc.R + r) * kam + item] = in[t * acc.R + r];
        acc.recall[t * kam + item] = in[T_ * acc.R + t];
      }
    }
    if (p_.score_curves && p_.use_cats) {
      acc.score_curves.resize(Ke_);
      parallel_for(Ke_, p_.num_threads,
                   [&](size_t k, int) { acc.score_curves[k] = score_curve(k, 0, M_ - 1); });
    }
    acc.params = p_;
    return acc;
  }

  const Params& p_;
  const size_t I_, K_, T_, A_, M_;
  const uint32_t all_;  // a bit per IoU threshold
  size_t Ke_ = 1;
  int max_det_ = 0;
  double min_thr_ = 1;
  std::vector<int64_t> gt_start_, dt_start_, kept_start_;
  std::vector<GtBox> gts_;
  std::vector<DtBox> dts_;
  std::vector<double> kept_score_;
  std::vector<int32_t> kept_rank_;
  std::vector<uint32_t> matched_, ignored_;  // [kept, A] bit t: IoU threshold t
  std::vector<int64_t> npig_;  // [Ke * I, A] unignored GT per evaluation cell and area
};

}  // namespace

std::vector<double> Params::default_iou_thresholds() { return linspace(.5, 0.95, 10); }
std::vector<double> Params::default_recall_thresholds() { return linspace(.0, 1.00, 101); }
std::vector<AreaRange> Params::default_area_ranges() {
  return {{"all", 0, 1e5 * 1e5},
          {"small", 0, 32 * 32},
          {"medium", 32 * 32, 96 * 96},
          {"large", 96 * 96, 1e5 * 1e5}};
}

Accumulated evaluate(const GroundTruthSet& gt, const std::vector<Detection>& detections,
                     const Params& params) {
  const Params p = normalized(params, gt);
  Evaluation evaluation(gt, detections, p);
  return evaluation.run();
}

std::map<std::string, double> metrics_map(const Metrics& metrics) {
  const auto& names = stat_names();
  std::map<std::string, double> out;
  for (size_t i = 0; i < metrics.stats.size() && i < names.size(); ++i)
    out[names[i]] = metrics.stats[i];
  for (const auto& c : metrics.per_category)
    out["AP/" + (c.name.empty() ? std::to_string(c.id) : c.name)] = c.ap;
  return out;
}

}  // namespace detforge::eval

// LossReducer: the per-step mean of a LossDict over ranks in one all-reduce, with the key list
// checked across ranks once at start-up and against every LossDict locally, so that a rank
// with a different key set can never leave the others waiting (shared/STYLE.md 3.5, 3.8;
// FIELD_FAILURES.md 4: RT-DETR's empty-rank denoising keys).
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "distributed/process_group.h"
#include "structures/loss_dict.h"

namespace detforge::dist {

/// Loss terms averaged over ranks, host values in key order.
struct ReducedLosses {
  std::vector<std::string> keys;
  std::vector<double> values;
  /// Throws std::out_of_range naming the key if unknown.
  double at(const std::string& key) const;
  bool all_finite() const;
  /// "loss_cls=0.512 loss_box=0.203".
  std::string to_string() const;
  /// Ranks that asked to stop in this reduction (reduce's `stop_requested`); the same on every
  /// rank, so all of them stop at the same step.
  int stop_votes = 0;
};

class LossReducer {
 public:
  /// `keys`: the detector's loss_keys(), fixed for the run. Collective: all-gathers a hash of
  /// the key list; if any rank differs, all ranks exchange their lists and throw a DistError
  /// listing each rank's keys and what is missing or extra relative to rank 0.
  LossReducer(std::shared_ptr<ProcessGroup> pg, std::vector<std::string> keys);

  /// Collective, on every rank at the same step. Each rank first checks its own LossDict:
  /// keys equal to keys() (same order) and every key set (LossDict::check_complete). A rank
  /// whose dict fails refuses it: its values never enter the reduction; the all-reduce of
  /// [K values + 1 status + 1 stop vote] then tells every rank, the ranks exchange their problems
  /// and all of them throw the same DistError naming each refusing rank and the missing, extra or
  /// unset keys. A rank that never reaches this call (crashed, threw elsewhere) makes the others
  /// throw a DistError when the collective timeout passes or its connection closes.
  /// `stop_requested` (a preemption signal reached this rank) travels in the same all-reduce:
  /// every rank learns how many ranks asked, at no extra collective.
  /// Returns the mean over ranks of each term.
  ReducedLosses reduce(const LossDict& losses, int64_t step, bool stop_requested = false);

  const std::vector<std::string>& keys() const { return keys_; }

 private:
  /// "" when `losses` can be reduced, else what is wrong with it.
  std::string check_local(const LossDict& losses) const;

  std::shared_ptr<ProcessGroup> pg_;
  std::vector<std::string> keys_;
};

}  // namespace detforge::dist

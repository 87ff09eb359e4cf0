// Which best*.ckpt files an evaluation earns. best_regular.ckpt follows the live weights,
// best_ema.ckpt the EMA weights and best.ckpt the better of both, each by one metric (higher is
// better; a tie keeps the earlier file, so a plateau does not rewrite checkpoints).
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "engine/checkpoint.h"

namespace detforge::engine {

/// Updates the best scores in `progress` with the evaluation after `epoch` of the live weights
/// (`live`) and, when the run has EMA, of the EMA weights (`ema`, else null), by `metric`;
/// returns the files to save, best_regular.ckpt and best_ema.ckpt before best.ckpt. Throws
/// ConfigError (eval.best_metric) when `metric` is not a key of the evaluation.
std::vector<std::string> update_best(TrainProgress& progress, const std::string& metric,
                                     const std::map<std::string, double>& live,
                                     const std::map<std::string, double>* ema, int64_t epoch);

}  // namespace detforge::engine

// Which optimizer `optimizer.type` names: the one value engine/optim.h (building the optimizer)
// and engine/fused_optim.h (the fused kernels it may pick) both need.
#pragma once

namespace detforge::engine {

enum class OptimizerType { kSgd, kAdam, kAdamW, kMuSgd };

}  // namespace detforge::engine

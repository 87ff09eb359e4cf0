#include "engine/training.h"

#include <utility>

#include "engine/observers/observers.h"
#include "engine/trainer.h"

namespace detforge::engine {

TrainResult run_training(Run& run, const std::string& resume, TrainHooks hooks) {
  auto observers = standard_observers(run);
  observers.insert(observers.end(), hooks.observers.begin(), hooks.observers.end());
  hooks.observers = std::move(observers);
  return train_run(run, resume, hooks);
}

}  // namespace detforge::engine

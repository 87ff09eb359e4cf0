// What a preemption tells the user, on every rank's log.
#include "core/errors.h"
#include "core/logging.h"
#include "engine/observers/observers.h"

namespace detforge::engine {
namespace {

class PreemptionReport : public RunObserver {
 public:
  void on_preemption(const PreemptionEvent& e) override {
    if (!e.stopped) {
      logging::warn(
          str("preemption: ",
              e.signal.empty() ? std::string("a signal on another rank, ") : e.signal + " here, ",
              e.votes, " of ", e.world_size, " rank(s) asked at step ", e.step,
              ": every rank stops after this optimizer step and writes last.ckpt"));
      return;
    }
    logging::warn(str("preemption: stopped at step ", e.step, ", wrote ", e.checkpoint,
                      e.signals_during_save > 0
                          ? str(" (", e.signals_during_save,
                                " more signal(s) arrived during the save and waited for it)")
                          : std::string()));
  }
};

}  // namespace

std::unique_ptr<RunObserver> make_preemption_report() {
  return std::make_unique<PreemptionReport>();
}

}  // namespace detforge::engine

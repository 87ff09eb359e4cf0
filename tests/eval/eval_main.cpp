// Evaluates one COCO results file and writes the numbers CocoBoundary compares with pycocotools:
// built by tests/eval/other_compiler.py with the compiler the main build does not use.
//   eval_main GT.json DT.json OUT.json
#include <cstdio>
#include <fstream>

#include <nlohmann/json.hpp>

#include "eval/coco_eval.h"
#include "eval/coco_io.h"

int main(int argc, char** argv) {
  if (argc != 4) {
    std::fprintf(stderr, "usage: eval_main GT.json DT.json OUT.json\n");
    return 2;
  }
  using namespace detforge::eval;
  const auto gt = load_ground_truth(argv[1]);
  const auto acc = evaluate(gt, load_results(argv[2], gt));
  const nlohmann::json out = {{"stats", summarize(acc, gt).stats},
                              {"precision", acc.precision},
                              {"recall", acc.recall},
                              {"iouThrs", Params::default_iou_thresholds()},
                              {"recThrs", Params::default_recall_thresholds()}};
  std::ofstream(argv[3]) << out.dump();
  return 0;
}

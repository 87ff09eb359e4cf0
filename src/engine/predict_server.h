// `detforge predict --serve`: one loaded detector answering requests on a pipe, so that a program
// that predicts image by image (the Python package's Model.predict in a loop) pays the start-up
// and the loading of the weights once. JSON lines in, JSON lines out (docs/python.md).
#pragma once

#include <iosfwd>

#include "data/coco.h"
#include "engine/predict.h"

namespace detforge::engine {

/// Writes {"ready": true, "categories": [{"id", "name"}, ...]} to `out`, then answers each line
/// of `in` until its end. A request is
///   {"id": any, "images": [{"path": FILE} | {"raw": FILE, "width": W, "height": H}, ...]}
/// where `raw` is a file of W*H*3 bytes, 8-bit BGR rows without padding (a numpy image). Its
/// answer is one line {"id": ..., "results": [[{"bbox": [x, y, w, h], "score", "category_id"},
/// ...], ...]} (one list per image, as `detforge predict` writes them), or {"id": ..., "error":
/// {"category", "exit_code", "message"}} for a request that fails (a bad line, an image that does
/// not decode, a raw file of the wrong size); the server then goes on with the next one.
void serve_predictions(const Predictor& predictor, const data::CategoryMap& categories,
                       std::istream& in, std::ostream& out);

}  // namespace detforge::engine

#include "distributed/loss_reducer.h"

#include <algorithm>
#include <cmath>
#include <sstream>
#include <stdexcept>

#include "core/errors.h"
#include "distributed/collectives.h"

namespace detforge::dist {
namespace {

std::string join(const std::vector<std::string>& items, const char* sep = ", ") {
  std::string out;
  for (const auto& s : items) out += (out.empty() ? "" : sep) + s;
  return out;
}

std::vector<std::string> split(const std::string& text, char sep) {
  std::vector<std::string> out;
  std::istringstream in(text);
  for (std::string item; std::getline(in, item, sep);) out.push_back(item);
  return out;
}

// Items of `a` not in `b`, in a's order.
std::vector<std::string> minus(const std::vector<std::string>& a,
                               const std::vector<std::string>& b) {
  std::vector<std::string> out;
  for (const auto& x : a) {
    if (std::find(b.begin(), b.end(), x) == b.end()) out.push_back(x);
  }
  return out;
}

std::string key_diff(const std::vector<std::string>& expected,
                     const std::vector<std::string>& got) {
  const auto missing = minus(expected, got);
  const auto extra = minus(got, expected);
  std::string text;
  if (!missing.empty()) text += "missing " + join(missing);
  if (!extra.empty()) text += std::string(text.empty() ? "" : ", ") + "extra " + join(extra);
  if (text.empty()) text = "same keys in a different order";
  return text;
}

}  // namespace

double ReducedLosses::at(const std::string& key) const {
  const auto it = std::find(keys.begin(), keys.end(), key);
  if (it == keys.end())
    throw std::out_of_range(str("ReducedLosses: unknown key '", key, "'; keys are ", join(keys)));
  return values[static_cast<size_t>(it - keys.begin())];
}

bool ReducedLosses::all_finite() const {
  return std::all_of(values.begin(), values.end(), [](double v) { return std::isfinite(v); });
}

std::string ReducedLosses::to_string() const {
  std::ostringstream os;
  for (size_t i = 0; i < keys.size(); ++i) os << (i ? " " : "") << keys[i] << '=' << values[i];
  return os.str();
}

LossReducer::LossReducer(std::shared_ptr<ProcessGroup> pg, std::vector<std::string> keys)
    : pg_(std::move(pg)), keys_(std::move(keys)) {
  TORCH_CHECK(pg_ != nullptr, "LossReducer: process group must not be null");
  TORCH_CHECK(!keys_.empty(), "LossReducer: the key list must not be empty");
  const std::string joined = join(keys_, "\n");
  // A hash first: one int64 per rank when all agree; the lists travel only to name a difference.
  const auto hash = static_cast<int64_t>(fnv1a64(joined));
  const auto mine =
      torch::full({1}, hash, torch::TensorOptions().dtype(torch::kInt64).device(pg_->device()));
  bool same = true;
  for (const auto& h : pg_->all_gather(mine, "loss key check"))
    same = same && h.cpu().item<int64_t>() == hash;
  if (same) return;
  const auto all = all_gather_bytes(*pg_, joined, "loss key exchange");
  const auto reference = split(all[0], '\n');
  std::string lists;
  for (size_t r = 0; r < all.size(); ++r) {
    const auto theirs = split(all[r], '\n');
    lists += str("; rank ", r, ": [", join(theirs), "]");
    if (r > 0 && theirs != reference)
      lists += str(" (vs rank 0: ", key_diff(reference, theirs), ")");
  }
  throw DistError(str(pg_->where(), " the loss keys differ across ranks", lists,
                      ". Every rank must build the same detector from the same config"));
}

std::string LossReducer::check_local(const LossDict& losses) const {
  // The same keys in the same order: the all-reduce adds the values by position.
  if (losses.keys() != keys_) {
    return str("keys differ from the run's loss keys: ", key_diff(keys_, losses.keys()),
               " (expected [", join(keys_), "])");
  }
  try {
    losses.check_complete();
  } catch (const c10::Error& e) {
    return e.what_without_backtrace();
  }
  return "";
}

ReducedLosses LossReducer::reduce(const LossDict& losses, int64_t step, bool stop_requested) {
  // A rank with a refused dict still joins the all-reduce below, so that no rank is left waiting
  // in a collective the others skipped.
  const std::string problem = check_local(losses);
  const auto k = static_cast<int64_t>(keys_.size());
  auto buffer =
      torch::zeros({k + 2}, torch::TensorOptions().dtype(torch::kFloat32).device(pg_->device()));
  if (problem.empty()) {
    buffer.narrow(0, 0, k).copy_(losses.stacked());
  } else {
    // Refused: its values stay out; the status slot tells every other rank to stop with us.
    buffer[k] = 1.0f;
  }
  if (stop_requested) buffer[k + 1] = 1.0f;
  pg_->all_reduce(buffer, ReduceOp::kSum, str("loss all-reduce (step ", step, ")"));
  const auto host = buffer.cpu();
  const float* v = host.data_ptr<float>();
  if (v[k] > 0.0f) {
    const auto problems =
        all_gather_bytes(*pg_, problem, str("loss problem exchange (step ", step, ")"));
    std::string text;
    for (size_t r = 0; r < problems.size(); ++r) {
      if (!problems[r].empty()) text += str("; rank ", r, ": ", problems[r]);
    }
    throw DistError(
        str(pg_->where(), " LossDict refused at step ", step, ", no loss was reduced", text,
            ". Every forward must set every loss key on every rank (graph_zero(pred) for a term "
            "that does not apply to a batch)"));
  }
  ReducedLosses out;
  out.keys = keys_;
  out.stop_votes = static_cast<int>(std::lround(v[k + 1]));
  for (int64_t i = 0; i < k; ++i)
    out.values.push_back(static_cast<double>(v[i]) / pg_->world_size());
  return out;
}

}  // namespace detforge::dist

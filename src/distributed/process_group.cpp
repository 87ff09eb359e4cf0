#include "distributed/process_group.h"

#include <arpa/inet.h>
#include <netdb.h>
#include <sys/socket.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <future>
#include <memory>
#include <thread>

#include <c10/cuda/CUDAFunctions.h>
#include <c10/util/Logging.h>
#include <torch/csrc/distributed/c10d/PrefixStore.hpp>
#include <torch/csrc/distributed/c10d/ProcessGroup.hpp>
#include <torch/csrc/distributed/c10d/ProcessGroupGloo.hpp>
#include <torch/csrc/distributed/c10d/TCPStore.hpp>
#ifdef USE_C10D_NCCL
#include <torch/csrc/distributed/c10d/ProcessGroupNCCL.hpp>
#endif

#include "core/errors.h"
#include "core/logging.h"

namespace detforge::dist {

struct ProcessGroup::Impl {
  DistEnv env;
  std::chrono::milliseconds timeout{};
  std::string backend_name = "none";
  torch::Device device = torch::kCPU;
  c10::intrusive_ptr<c10d::Store> store;
  c10::intrusive_ptr<c10d::Backend> backend;
  c10::intrusive_ptr<c10d::ProcessGroup> c10d_group;  // built by c10d_group()
  std::string failure;  // first failure; later collectives refuse to run

  std::string where() const { return str("[rank ", env.rank, "/", env.world_size, "]"); }
};

namespace {

using Clock = std::chrono::steady_clock;

// Past the backend's own timeout, so that its more specific message normally wins.
constexpr std::chrono::milliseconds kWaitMargin{3000};

std::string first_line(const std::string& text, size_t limit = 400) {
  std::string line = text.substr(0, text.find('\n'));
  if (line.size() > limit) {
    line.resize(limit);
    line.append("...");
  }
  return line;
}

// The backend's message without its source location ("[/path/pair.cc:561] ") or sign-off.
std::string message_of(const std::exception& e) {
  const auto* c10e = dynamic_cast<const c10::Error*>(&e);
  std::string text = c10e != nullptr ? c10e->what_without_backtrace() : e.what();
  if (text.rfind("[/", 0) == 0 && text.find("] ") != std::string::npos)
    text = text.substr(text.find("] ") + 2);
  const auto signoff = text.find(" GLHF");
  if (signoff != std::string::npos) text = text.substr(0, signoff);
  text = first_line(text);
  while (!text.empty() && (text.back() == '.' || text.back() == ' ')) text.pop_back();
  return text;
}

// c10d logs each failed connection attempt with a stack trace before it throws; the DistError
// carries the message, so keep c10's log quiet while the store connects.
class QuietC10Log {
 public:
  QuietC10Log() : saved_(FLAGS_caffe2_log_level) { FLAGS_caffe2_log_level = 3; }
  ~QuietC10Log() { FLAGS_caffe2_log_level = saved_; }

 private:
  int saved_;
};

bool contains_any(const std::string& text, std::initializer_list<const char*> needles) {
  for (const char* n : needles) {
    if (text.find(n) != std::string::npos) return true;
  }
  return false;
}

// What a user should conclude from a backend's message.
std::string diagnose(const std::string& backend_message) {
  if (contains_any(backend_message, {"Connection closed", "Connection reset", "Broken pipe",
                                     "closed by peer", "ECONNRESET", "EPIPE", "Socket closed"})) {
    return "another rank left the run (its connection closed); that rank's log names the cause";
  }
  if (contains_any(backend_message, {"imed out", "imeout", "timeout"})) {
    return "another rank did not join this collective in time: it stopped, is stuck, or called a "
           "different "
           "collective; that rank's log names the cause";
  }
  return "the backend reported an error";
}

bool is_loopback(const std::string& host) {
  return host == "localhost" || host.rfind("127.", 0) == 0 || host == "::1";
}

// This host's address on the route to `host` (the kernel's choice for a UDP socket connected
// there; nothing is sent), or "" when `host` does not resolve or is unreachable.
std::string local_address_towards(const std::string& host, int port) {
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_DGRAM;
  addrinfo* found = nullptr;
  if (::getaddrinfo(host.c_str(), std::to_string(port).c_str(), &hints, &found) != 0) return "";
  std::string out;
  for (addrinfo* a = found; a != nullptr && out.empty(); a = a->ai_next) {
    const int fd = ::socket(a->ai_family, SOCK_DGRAM | SOCK_CLOEXEC, 0);
    if (fd < 0) continue;
    sockaddr_storage local{};
    socklen_t size = sizeof(local);
    char text[INET6_ADDRSTRLEN] = {0};
    if (::connect(fd, a->ai_addr, a->ai_addrlen) == 0 &&
        ::getsockname(fd, reinterpret_cast<sockaddr*>(&local), &size) == 0) {
      const void* raw =
          local.ss_family == AF_INET
              ? static_cast<const void*>(&reinterpret_cast<sockaddr_in*>(&local)->sin_addr)
              : static_cast<const void*>(&reinterpret_cast<sockaddr_in6*>(&local)->sin6_addr);
      if (::inet_ntop(local.ss_family, raw, text, sizeof(text)) != nullptr) out = text;
    }
    ::close(fd);
  }
  ::freeaddrinfo(found);
  return out;
}

bool cuda_available() { return torch::cuda::is_available(); }

BackendKind resolve(BackendKind kind, const std::optional<torch::Device>& device) {
  if (kind != BackendKind::kAuto) return kind;
  if (device) return device->is_cuda() ? BackendKind::kNccl : BackendKind::kGloo;
  return cuda_available() ? BackendKind::kNccl : BackendKind::kGloo;
}

c10d::ReduceOp to_c10d(ReduceOp op) {
  switch (op) {
    case ReduceOp::kSum:
      return c10d::ReduceOp(c10d::ReduceOp::SUM);
    case ReduceOp::kMax:
      return c10d::ReduceOp(c10d::ReduceOp::MAX);
    case ReduceOp::kMin:
      return c10d::ReduceOp(c10d::ReduceOp::MIN);
  }
  return c10d::ReduceOp(c10d::ReduceOp::SUM);
}

c10::intrusive_ptr<c10d::Store> connect_store(const DistEnv& env, std::chrono::milliseconds timeout,
                                              const std::string& where) {
  c10d::TCPStoreOptions o;
  o.port = static_cast<std::uint16_t>(env.master_port);
  o.isServer = env.rank == 0 && !env.agent_store;
  o.numWorkers = static_cast<size_t>(env.world_size);
  // Every rank counts itself in below and waits for the rest, so that a timeout can say how many
  // joined (the store's own wait would only time out).
  o.waitWorkers = false;
  o.timeout = timeout;
  const std::string target = str("MASTER_ADDR=", env.master_addr, " MASTER_PORT=", env.master_port);
  c10::intrusive_ptr<c10d::Store> store;
  try {
    QuietC10Log quiet;
    store = c10::make_intrusive<c10d::TCPStore>(env.master_addr, o);
  } catch (const std::exception& e) {
    const std::string msg = message_of(e);
    if (o.isServer &&
        contains_any(msg, {"listen", "bind", "EADDRINUSE", "address already in use"})) {
      throw DistError(
          str(where, " cannot host the rendezvous store on ", target, ": ", msg,
              ". Another run may hold the port: choose a free MASTER_PORT (--master-port)"));
    }
    if (o.isServer)
      throw DistError(str(where, " cannot host the rendezvous store on ", target, ": ", msg));
    throw DistError(str(
        where, " cannot reach the rendezvous at ", target, " within ", timeout.count(), " ms: ",
        msg, ". Check that rank 0 is running and that MASTER_ADDR is reachable from this node"));
  }
  // A group torchrun restarts reuses its agent's store, and the restart count cannot name the
  // attempt: an agent restarted for a membership change keeps its count while the one whose
  // rank failed counts up. Every WORLD_SIZE arrivals at the store make one attempt instead, and
  // each attempt's keys live under its own prefix.
  c10::intrusive_ptr<c10d::Store> prefixed;
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  const auto too_few = [&](int64_t joined) {
    return DistError(str(where, " rendezvous at ", target, ": only ", joined, " of WORLD_SIZE=",
                         env.world_size, " ranks joined within ", timeout.count(),
                         " ms. Check that every node was started (--nnodes, one launcher per "
                         "node) with the same MASTER_ADDR/MASTER_PORT, and that this node can "
                         "reach it"));
  };
  int64_t joined = 0;
  try {
    QuietC10Log quiet;
    const int64_t attempt = (store->add("detforge/arrivals", 1) - 1) / env.world_size;
    prefixed = c10::make_intrusive<c10d::PrefixStore>(str("detforge/", attempt), store);
    joined = prefixed->add("joined", 1);
    while (joined < env.world_size) {
      if (std::chrono::steady_clock::now() >= deadline) throw too_few(joined);
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
      joined = prefixed->add("joined", 0);
    }
  } catch (const DistError&) {
    throw;
  } catch (const std::exception&) {
    // Rank 0 gave up waiting (or died) and took the store with it: the same count, from here.
    throw too_few(joined);
  }
  // Where each rank runs, for the post-mortem of a failed collective (fail()).
  const std::string address = local_address_towards(env.master_addr, env.master_port);
  char name[256] = {0};
  ::gethostname(name, sizeof(name) - 1);
  prefixed->set(str("node/", env.rank),
                str(name, address.empty() ? "" : " " + address, ", local rank ", env.local_rank));
  return prefixed;
}

c10::intrusive_ptr<c10d::Backend> make_gloo(const DistEnv& env,
                                            const c10::intrusive_ptr<c10d::Store>& store,
                                            std::chrono::milliseconds timeout) {
  auto opts = c10d::ProcessGroupGloo::Options::create(timeout);
  if (!env.gloo_interface.empty()) {
    opts->devices.push_back(c10d::ProcessGroupGloo::createDeviceForInterface(env.gloo_interface));
  } else if (is_loopback(env.master_addr)) {
    opts->devices.push_back(c10d::ProcessGroupGloo::createDeviceForHostname("127.0.0.1"));
  } else if (const auto local = local_address_towards(env.master_addr, env.master_port);
             !local.empty()) {
    // The interface that reaches rank 0's node: right on multi-homed nodes, where the host name
    // may resolve to a management or loopback address the other nodes cannot reach.
    opts->devices.push_back(c10d::ProcessGroupGloo::createDeviceForHostname(local));
  } else {
    opts->devices.push_back(c10d::ProcessGroupGloo::createDefaultDevice());
  }
  return c10::make_intrusive<c10d::ProcessGroupGloo>(store, env.rank, env.world_size, opts);
}

c10::intrusive_ptr<c10d::Backend> make_nccl(const DistEnv& env,
                                            const c10::intrusive_ptr<c10d::Store>& store,
                                            std::chrono::milliseconds timeout) {
#ifdef USE_C10D_NCCL
  // Without blocking wait a timed-out NCCL collective aborts the process from the watchdog
  // instead of throwing where the rank can say which collective it was.
  ::setenv("TORCH_NCCL_BLOCKING_WAIT", "1", /*overwrite=*/0);
  auto opts = c10d::ProcessGroupNCCL::Options::create();
  opts->timeout = timeout;
  return c10::make_intrusive<c10d::ProcessGroupNCCL>(store, env.rank, env.world_size, opts);
#else
  (void)env;
  (void)store;
  (void)timeout;
  throw DistError("backend nccl was requested but this LibTorch was built without NCCL; use gloo");
#endif
}

}  // namespace

BackendKind parse_backend(const std::string& name) {
  if (name == "auto") return BackendKind::kAuto;
  if (name == "gloo") return BackendKind::kGloo;
  if (name == "nccl") return BackendKind::kNccl;
  throw ConfigError(str("distributed backend '", name, "' is not one of auto, gloo, nccl"));
}

ProcessGroup::ProcessGroup(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}

ProcessGroup::~ProcessGroup() {
  // After a failure a backend may still wait on peers that are gone; tearing it down could
  // block this rank's exit for another timeout. The process is about to end: let it go.
  if (impl_ && !impl_->failure.empty() && impl_->backend) impl_->backend.release();
}

std::shared_ptr<ProcessGroup> ProcessGroup::single(torch::Device device) {
  auto impl = std::make_unique<Impl>();
  impl->device = device;
  return std::shared_ptr<ProcessGroup>(new ProcessGroup(std::move(impl)));
}

std::shared_ptr<ProcessGroup> ProcessGroup::create(const DistEnv& env,
                                                   const ProcessGroupOptions& options) {
  if (options.timeout.count() <= 0) {
    throw ConfigError(str("distributed timeout must be > 0 ms, got ", options.timeout.count()));
  }
  const BackendKind kind = resolve(options.backend, options.device);
  auto impl = std::make_unique<Impl>();
  impl->env = env;
  impl->timeout = options.timeout;
  const std::string where = impl->where();
  if (kind == BackendKind::kNccl) {
    if (!cuda_available())
      throw DistError(str(where, " backend nccl needs CUDA, but no CUDA device is available"));
    if (options.device && !options.device->is_cuda()) {
      throw DistError(str(where, " backend nccl needs a CUDA device, but this rank's device is ",
                          options.device->str()));
    }
    if (options.device) {
      c10::cuda::set_device(options.device->index());
      impl->device = *options.device;
    }
  }
  if (kind == BackendKind::kNccl && !options.device) {
    const int count = static_cast<int>(torch::cuda::device_count());
    if (env.local_rank >= count) {
      const char* visible = std::getenv("CUDA_VISIBLE_DEVICES");
      throw DistError(str(where, " LOCAL_RANK=", env.local_rank, " needs cuda:", env.local_rank,
                          " but only ", count, " CUDA device(s) are visible (CUDA_VISIBLE_DEVICES=",
                          visible ? visible : "<unset>", "); start at most ", count,
                          " ranks per node"));
    }
    // Before any CUDA work, so that nothing lands on cuda:0 by default.
    c10::cuda::set_device(static_cast<c10::DeviceIndex>(env.local_rank));
    impl->device = torch::Device(torch::kCUDA, static_cast<c10::DeviceIndex>(env.local_rank));
  }
  if (!env.launched()) return std::shared_ptr<ProcessGroup>(new ProcessGroup(std::move(impl)));

  logging::info(str("joining ", env.describe(), ", backend ",
                    kind == BackendKind::kNccl ? "nccl" : "gloo", ", timeout ",
                    options.timeout.count(), " ms"));
  impl->store = connect_store(env, options.timeout, where);
  try {
    if (kind == BackendKind::kNccl) {
      impl->backend = make_nccl(env, impl->store, options.timeout);
      impl->backend_name = "nccl";
    } else {
      impl->backend = make_gloo(env, impl->store, options.timeout);
      impl->backend_name = "gloo";
    }
  } catch (const DistError&) {
    throw;
  } catch (const std::exception& e) {
    const std::string msg = message_of(e);
    throw DistError(str(where, " creating the ", kind == BackendKind::kNccl ? "nccl" : "gloo",
                        " process group failed: ", diagnose(msg), " [", msg, "]"));
  }
  auto pg = std::shared_ptr<ProcessGroup>(new ProcessGroup(std::move(impl)));
  // One small collective now, so that a broken setup fails here and not at step 1.
  auto probe = torch::ones({1}, torch::TensorOptions().dtype(torch::kFloat32).device(pg->device()));
  pg->all_reduce(probe, ReduceOp::kSum, "start-up check all-reduce");
  const auto joined = probe.item<float>();
  if (joined != static_cast<float>(env.world_size)) {
    throw DistError(str(where, " start-up check counted ", joined,
                        " ranks, expected WORLD_SIZE=", env.world_size));
  }
  return pg;
}

int ProcessGroup::rank() const { return impl_->env.rank; }
int ProcessGroup::world_size() const { return impl_->env.world_size; }
int ProcessGroup::local_rank() const { return impl_->env.local_rank; }
std::string ProcessGroup::where() const { return impl_->where(); }
torch::Device ProcessGroup::device() const { return impl_->device; }
std::string ProcessGroup::backend_name() const { return impl_->backend_name; }
std::chrono::milliseconds ProcessGroup::timeout() const { return impl_->timeout; }

namespace {

void check_tensor(const ProcessGroup& pg, const torch::Tensor& t, const std::string& what) {
  TORCH_CHECK(t.defined() && t.is_contiguous(), what, ": tensor must be defined and contiguous");
  TORCH_CHECK(t.device() == pg.device(), what, ": tensor must be on ", pg.device(), " (backend ",
              pg.backend_name(), "), got ", t.device());
}

// How long the ranks that saw a collective fail wait for each other's report, and for the store.
constexpr std::chrono::milliseconds kReportWindow{2000};
constexpr std::chrono::milliseconds kStoreDeadline{3000};

// Names the ranks that failed: every rank whose collective fails reports to the rendezvous
// store and waits kReportWindow for the others; the ranks that never report died, hang or were
// cut off, and the store knows their node. A store that does not answer (its node, rank 0's,
// is gone or this node is cut off from it) is said as such. Runs on a thread of its own, so that
// a store stuck on a dead link cannot hold the failing rank past kStoreDeadline.
std::string post_mortem(const ProcessGroup::Impl& impl) {
  if (!impl.store || impl.env.world_size < 2) return "";
  auto result = std::make_shared<std::promise<std::string>>();
  auto answer = result->get_future();
  std::thread([store = impl.store, rank = impl.env.rank, world = impl.env.world_size, result] {
    try {
      store->set(str("failed/", rank), "1");
      std::vector<int> silent;
      const auto until = Clock::now() + kReportWindow;
      do {
        std::this_thread::sleep_for(std::chrono::milliseconds(100));
        silent.clear();
        for (int r = 0; r < world; ++r) {
          if (!store->check({str("failed/", r)})) silent.push_back(r);
        }
      } while (!silent.empty() && Clock::now() < until);
      if (silent.empty()) {
        result->set_value("every rank reported this failure (none died or was cut off)");
        return;
      }
      std::string text = "no report from ";
      for (size_t i = 0; i < silent.size(); ++i) {
        const auto node = store->get(str("node/", silent[i]));
        text += str(i ? ", " : "", "rank ", silent[i], " (node ",
                    std::string(node.begin(), node.end()), ")");
      }
      result->set_value(text + ": it died, hangs or is cut off; its log, if any, names the cause");
    } catch (const std::exception&) {
      result->set_value(
          "the rendezvous store on rank 0's node does not answer: that node died, "
          "or this node is cut off from it");
    }
  }).detach();
  if (answer.wait_for(kStoreDeadline) != std::future_status::ready) {
    return str("the rendezvous store on rank 0's node did not answer within ",
               kStoreDeadline.count(), " ms: that node died, or this node is cut off from it");
  }
  return answer.get();
}

DistError fail(ProcessGroup::Impl& impl, const std::string& what, const std::exception& e,
               Clock::time_point started) {
  const auto ms =
      std::chrono::duration_cast<std::chrono::milliseconds>(Clock::now() - started).count();
  const std::string msg = message_of(e);
  impl.failure =
      str(impl.where(), " ", what, " failed after ", ms, " ms (collective timeout ",
          impl.timeout.count(), " ms): ", diagnose(msg), " [", impl.backend_name, ": ", msg, "]");
  const std::string found = post_mortem(impl);
  if (!found.empty()) impl.failure += "; " + found;
  return DistError(impl.failure);
}

// Waits for every work; the first failure becomes a DistError and poisons the group.
void finish(ProcessGroup::Impl& impl, std::vector<c10::intrusive_ptr<c10d::Work>> works,
            const std::string& what, Clock::time_point started) {
  for (auto& work : works) {
    try {
      if (!work->wait(impl.timeout + kWaitMargin)) {
        throw std::runtime_error(
            str("timeout after ", (impl.timeout + kWaitMargin).count(), " ms"));
      }
    } catch (const std::exception& e) {
      throw fail(impl, what, e, started);
    }
  }
}

template <typename Start>
void run_collective(ProcessGroup::Impl& impl, const std::string& what, Start start) {
  if (!impl.failure.empty()) {
    throw DistError(str(impl.where(), " ", what, " not started: the process group failed earlier (",
                        impl.failure, ")"));
  }
  const auto started = Clock::now();
  std::vector<c10::intrusive_ptr<c10d::Work>> works;
  try {
    start(works);
  } catch (const DistError&) {
    throw;
  } catch (const std::exception& e) {
    const std::string msg = message_of(e);
    impl.failure = str(impl.where(), " ", what, " could not start: ", diagnose(msg), " [",
                       impl.backend_name, ": ", msg, "]");
    throw DistError(impl.failure);
  }
  finish(impl, std::move(works), what, started);
}

}  // namespace

void ProcessGroup::all_reduce(const torch::Tensor& tensor, ReduceOp op, const std::string& what) {
  all_reduce_many({tensor}, op, what);
}

void ProcessGroup::all_reduce_many(const std::vector<torch::Tensor>& tensors, ReduceOp op,
                                   const std::string& what) {
  for (const auto& t : tensors) check_tensor(*this, t, what);
  if (!impl_->backend) return;
  run_collective(*impl_, what, [&](std::vector<c10::intrusive_ptr<c10d::Work>>& works) {
    c10d::AllreduceOptions opts;
    opts.reduceOp = to_c10d(op);
    opts.timeout = impl_->timeout;
    for (const auto& t : tensors) {
      std::vector<at::Tensor> one{t};
      works.push_back(impl_->backend->allreduce(one, opts));
    }
  });
}

void ProcessGroup::broadcast(const torch::Tensor& tensor, int root, const std::string& what) {
  check_tensor(*this, tensor, what);
  TORCH_CHECK(root >= 0 && root < world_size(), what, ": root ", root, " outside [0, ",
              world_size(), ")");
  if (!impl_->backend) return;
  run_collective(*impl_, what, [&](std::vector<c10::intrusive_ptr<c10d::Work>>& works) {
    c10d::BroadcastOptions opts;
    opts.rootRank = root;
    opts.timeout = impl_->timeout;
    std::vector<at::Tensor> one{tensor};
    works.push_back(impl_->backend->broadcast(one, opts));
  });
}

std::vector<torch::Tensor> ProcessGroup::all_gather(const torch::Tensor& tensor,
                                                    const std::string& what) {
  check_tensor(*this, tensor, what);
  if (!impl_->backend) return {tensor.clone()};
  std::vector<std::vector<at::Tensor>> outputs(1);
  for (int r = 0; r < world_size(); ++r) outputs[0].push_back(torch::empty_like(tensor));
  run_collective(*impl_, what, [&](std::vector<c10::intrusive_ptr<c10d::Work>>& works) {
    c10d::AllgatherOptions opts;
    opts.timeout = impl_->timeout;
    std::vector<at::Tensor> input{tensor};
    works.push_back(impl_->backend->allgather(outputs, input, opts));
  });
  return outputs[0];
}

void ProcessGroup::barrier(const std::string& what) {
  // An all-reduce rather than the backend's barrier: NCCL's needs device ids, Gloo's does not.
  auto token = torch::zeros({1}, torch::TensorOptions().dtype(torch::kFloat32).device(device()));
  all_reduce(token, ReduceOp::kSum, what);
}

c10::intrusive_ptr<c10d::ProcessGroup> ProcessGroup::c10d_group() {
  if (!impl_->backend) return {};
  if (!impl_->c10d_group) {
    const bool nccl = impl_->backend_name == "nccl";
    const auto type =
        nccl ? c10d::ProcessGroup::BackendType::NCCL : c10d::ProcessGroup::BackendType::GLOO;
    auto group = c10::make_intrusive<c10d::ProcessGroup>(impl_->store, rank(), world_size());
    group->setDefaultBackend(type);
    group->setBackend(nccl ? c10::DeviceType::CUDA : c10::DeviceType::CPU, type, impl_->backend);
    impl_->c10d_group = std::move(group);
  }
  return impl_->c10d_group;
}

DistError ProcessGroup::failure(const std::string& what, const std::exception& error,
                                std::chrono::steady_clock::time_point started) {
  return fail(*impl_, what, error, started);
}

}  // namespace detforge::dist

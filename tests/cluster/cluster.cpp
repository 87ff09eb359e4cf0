#include "cluster/cluster.h"

#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <sstream>
#include <stdexcept>
#include <thread>

namespace detforge::testing {
namespace {

std::string quote(const std::string& text) {
  std::string out = "'";
  for (char c : text) out += c == '\'' ? std::string("'\\''") : std::string(1, c);
  return out + "'";
}

}  // namespace

std::unique_ptr<SimulatedCluster> SimulatedCluster::create(int hosts, std::string* why_not) {
  if (::geteuid() != 0) {
    *why_not = "simulated hosts need root or CAP_NET_ADMIN (network namespaces, veth pairs)";
    return nullptr;
  }
  const auto probe =
      run_command("command -v ip >/dev/null && command -v iptables-legacy >/dev/null");
  if (probe.exit_code != 0) {
    *why_not =
        "`ip` (iproute2) or `iptables-legacy` (iptables) is not installed; "
        "scripts/setup.sh installs them";
    return nullptr;
  }
  std::unique_ptr<SimulatedCluster> c(
      new SimulatedCluster(hosts, "dfc" + std::to_string(::getpid())));
  try {
    c->setup();
  } catch (const std::exception& e) {
    *why_not = std::string("cannot make network namespaces here: ") + e.what();
    return nullptr;
  }
  return c;
}

SimulatedCluster::SimulatedCluster(int hosts, std::string prefix)
    : hosts_(hosts), prefix_(std::move(prefix)) {}

std::string SimulatedCluster::ns(int host) const {
  std::string name = prefix_;
  name += host < 0 ? std::string("sw") : std::string("h") + std::to_string(host);
  return name;
}

std::string SimulatedCluster::address(int host) const {
  return "10.77.0." + std::to_string(host + 1);
}

std::string SimulatedCluster::on(int host) const { return "ip netns exec " + ns(host) + " "; }

void SimulatedCluster::must(const std::string& command) const {
  const auto r = run_command(command);
  if (r.exit_code != 0) throw std::runtime_error(command + ": " + r.output);
}

void SimulatedCluster::setup() {
  up_ = true;  // from here on the destructor cleans whatever exists
  const std::string sw = ns(-1);
  must("ip netns add " + sw);
  must(on(-1) + "ip link add br0 type bridge && " + on(-1) + "ip link set br0 up");
  for (int h = 0; h < hosts_; ++h) {
    const std::string host = ns(h);
    // Created in the switch's namespace, so that no interface ever appears in the machine's own.
    std::string peer = "p";
    peer += std::to_string(h);
    must("ip netns add " + host);
    must(on(-1) + "ip link add " + peer + " type veth peer name eth0 netns " + host);
    must(on(-1) + "ip link set " + peer + " master br0 up");
    must(on(h) + "ip link set lo up");
    must(on(h) + "ip addr add " + address(h) + "/24 dev eth0");
    must(on(h) + "ip link set eth0 up");
  }
  // The fault tools must work here too (a kernel may lack iptables' tables or tbf): probed on
  // host 0's loopback, so that their absence is a skip with the reason, not a failed test.
  must(on(0) + "iptables-legacy -A INPUT -i lo -m statistic --mode random --probability 0 -j DROP");
  must(on(0) + "iptables-legacy -F INPUT");
  must(on(0) + "tc qdisc add dev lo root tbf rate 1gbit burst 32kb latency 50ms");
  must(on(0) + "tc qdisc del dev lo root");
}

SimulatedCluster::~SimulatedCluster() {
  if (!up_) return;
  for (int h = -1; h < hosts_; ++h) {
    // Everything still running on the host dies with it; then the namespace goes.
    run_command("pids=$(ip netns pids " + ns(h) +
                " 2>/dev/null); [ -n \"$pids\" ] && kill -9 $pids");
    run_command("ip netns del " + ns(h) + " 2>/dev/null");
  }
}

CommandResult SimulatedCluster::run(int host, const std::string& command) const {
  return run_command(on(host) + "bash -c " + quote(command));
}

pid_t SimulatedCluster::start(int host, const std::string& command, const std::string& log) const {
  const pid_t pid = ::fork();
  if (pid < 0) throw std::runtime_error("fork failed");
  if (pid == 0) {
    const std::string line = on(host) + "bash -c " + quote(command) + " > " + quote(log) + " 2>&1";
    ::execl("/bin/sh", "sh", "-c", line.c_str(), static_cast<char*>(nullptr));
    ::_exit(127);
  }
  return pid;
}

int SimulatedCluster::wait(pid_t pid, double timeout_s) {
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::duration<double>(timeout_s);
  for (;;) {
    int status = 0;
    if (::waitpid(pid, &status, WNOHANG) == pid)
      return WIFSIGNALED(status) ? 128 + WTERMSIG(status) : WEXITSTATUS(status);
    if (std::chrono::steady_clock::now() > deadline) {
      ::kill(pid, SIGKILL);
      ::waitpid(pid, &status, 0);
      return -1;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
}

void SimulatedCluster::kill_host(int host, int signal) const {
  run_command("pids=$(ip netns pids " + ns(host) + "); [ -n \"$pids\" ] && kill -" +
              std::to_string(signal) + " $pids");
}

std::vector<pid_t> SimulatedCluster::pids(int host, const std::string& text) const {
  const auto r = run_command("for p in $(ip netns pids " + ns(host) +
                             "); do tr '\\0' ' ' < /proc/$p/cmdline 2>/dev/null | grep -q -- " +
                             quote("^" + text) + " && echo $p; done");
  std::vector<pid_t> out;
  std::istringstream in(r.output);
  for (pid_t p; in >> p;) out.push_back(p);
  return out;
}

void SimulatedCluster::link_down(int host) const { must(on(host) + "ip link set eth0 down"); }
void SimulatedCluster::link_up(int host) const { must(on(host) + "ip link set eth0 up"); }

void SimulatedCluster::drop_all(int host) const {
  must(on(host) + "iptables-legacy -A INPUT -i eth0 -j DROP");
  must(on(host) + "iptables-legacy -A OUTPUT -o eth0 -j DROP");
}

void SimulatedCluster::drop_share(int host, double percent) const {
  must(on(host) + "iptables-legacy -A INPUT -i eth0 -m statistic --mode random --probability " +
       std::to_string(percent / 100.0) + " -j DROP");
}

void SimulatedCluster::limit_rate(int host, double mbit_per_s) const {
  must(on(host) + "tc qdisc add dev eth0 root tbf rate " + std::to_string(mbit_per_s) +
       "mbit burst 256kb latency 100ms");
}

bool SimulatedCluster::delay(int host, double ms) const {
  return run_command(on(host) + "tc qdisc add dev eth0 root netem delay " + std::to_string(ms) +
                     "ms")
             .exit_code == 0;
}

}  // namespace detforge::testing

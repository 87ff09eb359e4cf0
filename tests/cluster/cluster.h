// Simulated hosts for multi-node tests: each host is a Linux network namespace with its own
// loopback and an address on a private bridge (10.77.0.<host + 1>/24). The bridge sits in a
// namespace of its own, so nothing of the test touches the machine's network. Commands run "on a
// host" through `ip netns exec`; faults are applied to a host's link (down, drop everything, drop
// a share of packets with iptables' statistic match, limit the rate with tbf, delay with netem
// where the kernel has it). Needs root or CAP_NET_ADMIN: available() says why not. The destructor
// kills every process left in the namespaces and deletes them, on every exit path; names hold the
// test's pid, so parallel ctest jobs never collide.
#pragma once

#include <sys/types.h>

#include <memory>
#include <string>
#include <vector>

#include "test_util.h"

namespace detforge::testing {

class SimulatedCluster {
 public:
  /// Makes `hosts` hosts. When the machine cannot (no permission, no `ip`), returns null and sets
  /// `why_not`.
  static std::unique_ptr<SimulatedCluster> create(int hosts, std::string* why_not);
  ~SimulatedCluster();
  SimulatedCluster(const SimulatedCluster&) = delete;
  SimulatedCluster& operator=(const SimulatedCluster&) = delete;

  int hosts() const { return hosts_; }
  /// The host's address on the bridge: "10.77.0.1" for host 0.
  std::string address(int host) const;
  /// `ip netns exec <ns> ` (with a trailing space): prefix a command with it to run on `host`.
  std::string on(int host) const;

  /// Runs `command` (bash) on `host` and waits for it.
  CommandResult run(int host, const std::string& command) const;
  /// Starts `command` (bash) on `host` in the background, output to `log`; returns its pid.
  pid_t start(int host, const std::string& command, const std::string& log) const;
  /// Waits for a process start() returned; its exit code, or 128 + signal. -1 after `timeout_s`
  /// (the process is then killed).
  static int wait(pid_t pid, double timeout_s);

  /// Sends `signal` to every process on `host` (SIGKILL: the host dies).
  void kill_host(int host, int signal) const;
  /// Pids of the processes on `host` whose command line starts with `text` (a basic regex).
  std::vector<pid_t> pids(int host, const std::string& text) const;

  /// Link faults on the host's side of its cable; each throws (failing the test) if the command
  /// fails.
  void link_down(int host) const;
  void link_up(int host) const;
  /// Drops every packet to and from the host (100% loss; the link stays up).
  void drop_all(int host) const;
  /// Drops `percent` of the packets the host receives, at random.
  void drop_share(int host, double percent) const;
  /// Limits the host's egress to `mbit_per_s` (tbf).
  void limit_rate(int host, double mbit_per_s) const;
  /// Adds `ms` of delay to the host's egress (netem). False when the kernel has no netem.
  bool delay(int host, double ms) const;

 private:
  SimulatedCluster(int hosts, std::string prefix);
  void setup();
  void must(const std::string& command) const;
  std::string ns(int host) const;

  int hosts_;
  std::string prefix_;  // "dfc<pid>"
  bool up_ = false;
};

}  // namespace detforge::testing

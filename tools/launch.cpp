// detforge launch: starts the ranks of one node with torchrun's variables (docs/distributed.md).
#include <chrono>
#include <memory>

#include "cli.h"
#include "commands.h"
#include "core/errors.h"
#include "core/logging.h"
#include "distributed/launcher.h"

namespace detforge::tools {

void add_launch_command(CLI::App& app) {
  auto opts = std::make_shared<dist::LaunchOptions>();
  auto grace_s = std::make_shared<double>(10.0);
  auto* cmd = app.add_subcommand("launch", command_help("launch"));
  cmd->add_option("--nproc-per-node,--nproc_per_node", opts->nproc_per_node, "ranks on this node")
      ->capture_default_str()
      ->check(CLI::Range(1, 1024));
  cmd->add_option("--nnodes", opts->nnodes, "nodes in the run (one launcher per node)")
      ->capture_default_str()
      ->check(CLI::Range(1, 65536));
  cmd->add_option("--node-rank,--node_rank", opts->node_rank, "this node's index in [0, nnodes)")
      ->capture_default_str()
      ->check(CLI::NonNegativeNumber);
  cmd->add_option("--master-addr,--master_addr", opts->master_addr,
                  "host of node 0, reachable from every node")
      ->capture_default_str();
  cmd->add_option("--master-port,--master_port", opts->master_port,
                  "rendezvous port on the master host")
      ->capture_default_str()
      ->check(CLI::Range(1, 65535));
  cmd->add_option("--grace-period", *grace_s,
                  "seconds between SIGTERM and SIGKILL when stopping ranks")
      ->capture_default_str()
      ->check(CLI::Range(0.0, 3600.0));
  cmd->add_option("command", opts->command, "program and arguments, after '--'")->required();
  cmd->callback([opts, grace_s] {
    opts->grace = std::chrono::milliseconds(static_cast<int64_t>(*grace_s * 1000.0));
    const int world = opts->nnodes * opts->nproc_per_node;
    logging::info(str("launching ", opts->nproc_per_node, " rank(s) on node ", opts->node_rank, "/",
                      opts->nnodes, " (world size ", world, "), rendezvous ", opts->master_addr,
                      ":", opts->master_port));
    const auto exits = dist::launch(*opts);
    logging::info(str("all ", exits.size(), " rank(s) on this node finished"));
  });
}

}  // namespace detforge::tools

// Two hosts, simulated on this machine: two network namespaces joined by a veth pair, each with
// its own address and host name (hostA, hostB), and mpirun launching across them over TCP the
// way a multi-host user does — a hostfile with distinct host names, a launcher agent (here one
// that enters the other namespace instead of ssh), `--mca btl self,tcp`, and train.out_dir on a
// filesystem both see. The veth byte counters prove the traffic crossed between the "hosts";
// the losses equal those of the same job on one host (stated tolerance). Where the machine does
// not permit namespaces (not root, no CAP_NET_ADMIN) the test says so and skips.
#include <gtest/gtest.h>

#include <unistd.h>

#include <cmath>
#include <filesystem>
#include <string>
#include <vector>

#include "tests/support/dist_test_support.h"
#include "tests/support/resume_test_support.h"

namespace ledgerlm {
namespace {

namespace fs = std::filesystem;
using testing::CommandResult;
using testing::run_command;

constexpr const char* kNsA = "llm_hostA";
constexpr const char* kNsB = "llm_hostB";

class DistTwoHosts : public ::testing::Test {
 protected:
  void SetUp() override {
    if (testing::mpirun_path().empty()) GTEST_SKIP() << "skipped: this build has no MPI";
    if (::geteuid() != 0) GTEST_SKIP() << "skipped: network namespaces need root";
    TearDown();  // leftovers of an interrupted run
    const std::string a = kNsA, b = kNsB;
    const CommandResult r =
        run_command("ip netns add " + a + " && ip netns add " + b +
                    " && ip link add llm_vethA type veth peer name llm_vethB"
                    " && ip link set llm_vethA netns " +
                    a + " && ip link set llm_vethB netns " + b + " && ip -n " + a +
                    " addr add 10.77.0.1/24 dev llm_vethA && ip -n " + b +
                    " addr add 10.77.0.2/24 dev llm_vethB && ip -n " + a +
                    " link set llm_vethA up && ip -n " + b + " link set llm_vethB up && ip -n " +
                    a + " link set lo up && ip -n " + b + " link set lo up 2>&1");
    if (r.exit_code != 0)
      GTEST_SKIP() << "skipped: this machine does not permit network namespaces: " << r.output;
    made_ = true;
    // `ip netns exec` bind-mounts /etc/netns/NAME/hosts over /etc/hosts: the host names.
    for (const std::string& ns : {a, b}) {
      fs::create_directories("/etc/netns/" + ns);
      testing::write_file("/etc/netns/" + ns + "/hosts",
                          "127.0.0.1 localhost\n10.77.0.1 hostA\n10.77.0.2 hostB\n");
    }
    dir_ = testing::make_temp_dir("ledgerlm_two_hosts_");
    testing::write_file(
        dir_ + "/agent.sh",
        "#!/bin/bash\n# enters the named host's namespace instead of ssh-ing to it\n"
        "host=$1; shift\n"
        "case \"$host\" in hostA) ns=" +
            a + " ;; hostB) ns=" + b +
            " ;; *) echo \"agent: unknown host $host\" >&2; exit 1 ;; esac\n"
            "exec ip netns exec \"$ns\" /bin/sh -c \"$*\"\n");
    fs::permissions(dir_ + "/agent.sh", fs::perms::owner_all);
    testing::write_file(dir_ + "/hostfile", "hostA slots=1\nhostB slots=1\n");
  }

  void TearDown() override {
    run_command(std::string("ip netns del ") + kNsA + " 2>/dev/null; ip netns del " + kNsB +
                " 2>/dev/null");
    std::error_code ec;
    fs::remove_all(std::string("/etc/netns/") + kNsA, ec);
    fs::remove_all(std::string("/etc/netns/") + kNsB, ec);
  }

  static int64_t veth_bytes(const char* ns, const char* dev, const char* what) {
    const CommandResult r = run_command(std::string("ip netns exec ") + ns +
                                        " cat /sys/class/net/" + dev + "/statistics/" + what);
    return r.exit_code == 0 ? std::stoll(r.output) : -1;
  }

  bool made_ = false;
  std::string dir_;
};

TEST_F(DistTwoHosts, TrainingAcrossTwoNamespacesOverTcpMatchesOneHost) {
  std::string text;
  for (int i = 0; i < 300; ++i) text += "Two hosts, one job, line " + std::to_string(i) + ".\n";
  const std::string data = testing::resume_prepare_corpus("ledgerlm_two_hosts_data_", text);
  const std::string out = dir_ + "/runs";  // one filesystem: both "hosts" see it
  const std::string flags = " --train.max_steps 6 --train.micro_batch 4 --dist.zero 3";
  const std::string bin = testing::ledgerlm_binary() + " train";
  const int64_t before = veth_bytes(kNsA, "llm_vethA", "tx_bytes");
  const CommandResult two = run_command(
      std::string("ip netns exec ") + kNsA + " " + testing::mpirun_path() +
      " --allow-run-as-root --hostfile " + dir_ + "/hostfile -np 2 --mca plm_rsh_agent " + dir_ +
      "/agent.sh --mca btl self,tcp --mca btl_tcp_if_include 10.77.0.0/24"
      " --mca oob_tcp_if_include 10.77.0.0/24 -x OMP_NUM_THREADS=1 " +
      testing::sanitizer_exports() + bin + testing::resume_tiny_flags(data, out, "two") + flags +
      " 2>&1");
  ASSERT_EQ(two.exit_code, 0) << two.output;
  const int64_t sent = veth_bytes(kNsA, "llm_vethA", "tx_bytes") - before;
  const int64_t received = veth_bytes(kNsB, "llm_vethB", "rx_bytes");
  std::printf("hostA sent %lld bytes over the veth, hostB received %lld\n",
              static_cast<long long>(sent), static_cast<long long>(received));
  // Every step all-gathers and reduce-scatters the whole model (~0.6 MB of fp32 weights and
  // gradients per step): far more than the launch's own handshake.
  EXPECT_GT(sent, 1000000) << "the ranks did not talk across the namespaces";
  EXPECT_GT(received, 1000000);

  const CommandResult one =
      run_command(testing::mpirun_prefix(2) + bin + testing::resume_tiny_flags(data, out, "one") +
                  flags + " 2>&1");
  ASSERT_EQ(one.exit_code, 0) << one.output;
  // The same collectives on the same sizes (the algorithm is chosen by size and rank count, not
  // by the transport): the losses agree to rounding at most (1e-7 relative, as across world
  // sizes); the output says whether they were bitwise equal.
  const std::vector<double> a = testing::run_losses(out + "/two"),
                            b = testing::run_losses(out + "/one");
  ASSERT_EQ(a.size(), 6u);
  ASSERT_EQ(a.size(), b.size());
  bool bitwise = true;
  for (size_t s = 0; s < a.size(); ++s) {
    EXPECT_NEAR(a[s], b[s], 1e-7 * b[s]) << "step " << s + 1;
    bitwise = bitwise && a[s] == b[s];
  }
  std::printf("losses across two hosts vs one host: %s\n",
              bitwise ? "bitwise equal" : "within 1e-7");
}

}  // namespace
}  // namespace ledgerlm

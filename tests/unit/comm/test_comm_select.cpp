// dist.comm's rules and NCCL's loader (train/comm/comm_select.h), on any machine:
//   - auto takes NCCL only on cuda with several ranks in a build that has it; mpi never;
//   - nccl is refused with device cpu and in a build without the NCCL Comm, in one line each;
//   - every CUDA build that found nccl.h has the NCCL Comm, with MPI or without;
//   - NCCL's version codes decode in both of nccl.h's formats, and another major is refused;
//   - a library path that does not exist is a reason naming it, never a crash;
//   - comm_for_run falls back to the host Comm with auto (one line naming the rank and why), and
//     is an error with nccl;
//   - the line of a NCCL timeout says that NCCL does not name the rank.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <string>
#include <vector>

#include "train/comm/comm_select.h"

namespace ledgerlm {
namespace {

std::string error_of(const std::function<void()>& fn) {
  try {
    fn();
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

TEST(CommSelect, AutoTakesNcclOnlyOnCudaWithSeveralRanks) {
  EXPECT_EQ(comm_choose("auto", "cuda", 2, true), CommPlan::kTryNccl);
  EXPECT_EQ(comm_choose("auto", "cuda", 8, true), CommPlan::kTryNccl);
  EXPECT_EQ(comm_choose("auto", "cuda", 1, true), CommPlan::kHost) << "one rank: nothing to move";
  EXPECT_EQ(comm_choose("auto", "cpu", 4, true), CommPlan::kHost);
  EXPECT_EQ(comm_choose("auto", "cuda", 4, false), CommPlan::kHost) << "a build without it";
  for (const char* device : {"cpu", "cuda"})
    for (int world : {1, 4}) EXPECT_EQ(comm_choose("mpi", device, world, true), CommPlan::kHost);
  // nccl insists, with one rank too (the way its tests run it).
  EXPECT_EQ(comm_choose("nccl", "cuda", 1, true), CommPlan::kNccl);
  EXPECT_EQ(comm_choose("nccl", "cuda", 4, true), CommPlan::kNccl);
}

TEST(CommSelect, NcclIsRefusedOnTheCpuAndInABuildWithoutIt) {
  std::string err = error_of([] { comm_choose("nccl", "cpu", 2, true); });
  EXPECT_EQ(err,
            "dist.comm = nccl needs train.device = cuda (the device is cpu; NCCL moves GPU "
            "memory only: use dist.comm = auto or mpi)");
  err = error_of([] { comm_choose("nccl", "cuda", 2, false); });
  EXPECT_EQ(err,
            "dist.comm = nccl: this build of ledgerlm has no NCCL Comm (it needs a CUDA build "
            "that found nccl.h; use dist.comm = auto or mpi)");
  err = error_of([] { comm_choose("gloo", "cuda", 2, true); });
  EXPECT_EQ(err, "dist.comm: expected one of auto, mpi, nccl (got 'gloo')");
}

// Every CUDA build that found nccl.h has the NCCL Comm, MPI or not: a build without MPI (the GPU
// bundle) runs it with one rank over the single Comm, where dist.comm = nccl is allowed and auto
// stays on the host Comm.
TEST(CommSelect, EveryCudaBuildWithTheHeaderHasTheNcclComm) {
#if defined(LEDGERLM_TEST_CUDA_WITH_NCCL_HEADER)
  EXPECT_TRUE(comm_nccl_built()) << "a CUDA build that found nccl.h lacks the NCCL Comm";
  std::unique_ptr<Comm> single = comm_create_single();
  EXPECT_EQ(comm_choose("nccl", "cuda", single->world(), comm_nccl_built()), CommPlan::kNccl);
  EXPECT_EQ(comm_choose("auto", "cuda", single->world(), comm_nccl_built()), CommPlan::kHost);
#else
  GTEST_SKIP() << "skipped: not a CUDA build that found nccl.h";
#endif
}

TEST(CommSelect, NcclVersionCodesDecodeInBothFormats) {
  // nccl.h: NCCL_VERSION(X, Y, Z) = X*1000 + Y*100 + Z up to 2.8, X*10000 + Y*100 + Z after.
  EXPECT_EQ(nccl_version_text(2804), "2.8.4");
  EXPECT_EQ(nccl_version_text(20900), "2.9.0");
  EXPECT_EQ(nccl_version_text(22809), "2.28.9");
  EXPECT_EQ(nccl_version_text(30102), "3.1.2");
  EXPECT_EQ(nccl_version_check(22809, 2), "");
  EXPECT_EQ(nccl_version_check(2804, 2), "");
  EXPECT_EQ(nccl_version_check(30102, 2),
            "NCCL 3.1.2 has major version 3 but ledgerlm was compiled against NCCL 2.x (its "
            "structures and calls may differ)");
  EXPECT_EQ(nccl_version_check(0, 2), "ncclGetVersion returned 0 (not a version)");
}

TEST(CommSelect, AMissingLibraryIsAReasonNamingIt) {
  std::string why;
  int version = -1;
  const std::string path = "/nonexistent/dir/libnccl.so.2";
  EXPECT_EQ(nccl_library_open({path}, 2, &why, &version), nullptr);
  EXPECT_EQ(why.rfind("NCCL did not load (" + path + ": ", 0), 0u) << why;
  EXPECT_EQ(version, -1) << "untouched when nothing loaded";
  // A library that loads but is not NCCL: the first missing symbol and the library are named.
  EXPECT_EQ(nccl_library_open({"libm.so.6"}, 2, &why), nullptr);
  EXPECT_NE(why.find("ncclGetVersion not found in libm.so.6"), std::string::npos) << why;
}

// The real library, where this machine has one (a CUDA toolkit with NCCL): every symbol the
// Comm calls is found and its version passes the check. Needs no GPU.
TEST(CommSelect, TheInstalledNcclHasEverySymbolAndAKnownMajor) {
  std::string why;
  int version = 0;
  std::unique_ptr<SharedLibrary> lib;
  for (const char* name : {"libnccl.so.2", "/usr/local/cuda/lib64/libnccl.so.2"})
    if (!lib) lib = nccl_library_open({name}, 2, &why, &version);
  if (!lib) GTEST_SKIP() << "skipped: no NCCL 2 library here (" << why << ")";
  EXPECT_EQ(nccl_version_decode(version).major, 2);
  std::printf("NCCL %s at %s\n", nccl_version_text(version).c_str(), lib->path().c_str());
}

TEST(CommSelect, TheLibraryNameComesFromTheEnvironmentWhenSet) {
  ::unsetenv("LEDGERLM_NCCL_LIBRARY");
  EXPECT_EQ(nccl_library_names(), std::vector<std::string>{"libnccl.so.2"});
  ::setenv("LEDGERLM_NCCL_LIBRARY", "/opt/nccl/lib/libnccl.so.2", 1);
  EXPECT_EQ(nccl_library_names(), std::vector<std::string>{"/opt/nccl/lib/libnccl.so.2"});
  ::unsetenv("LEDGERLM_NCCL_LIBRARY");
}

// The whole decision with a host Comm (single) and a backend: mpi and auto on the cpu stay on the
// host Comm; nccl there is the refusal above; auto and nccl on a backend that cannot reach NCCL
// (here: the library path is missing) fall back with auto and fail with nccl, naming why.
TEST(CommSelect, CommForRunFallsBackWithAutoAndFailsWithNccl) {
  std::unique_ptr<Comm> host = comm_create_single();
  std::unique_ptr<Backend> be = backend_create_cpu(1);
  std::unique_ptr<Comm> owned;
  EXPECT_EQ(&comm_for_run("mpi", "cpu", *host, *be, &owned), host.get());
  EXPECT_EQ(&comm_for_run("auto", "cpu", *host, *be, &owned), host.get());
  EXPECT_EQ(owned, nullptr);
  EXPECT_NE(error_of([&] { comm_for_run("nccl", "cpu", *host, *be, &owned); }), "");
  if (!comm_nccl_built()) {
    const std::string err = error_of([&] { comm_for_run("nccl", "cuda", *host, *be, &owned); });
    EXPECT_NE(err.find("has no NCCL Comm"), std::string::npos) << err;
    return;
  }
  // The library cannot load: with nccl the run stops with the reason (the path named).
  ::setenv("LEDGERLM_NCCL_LIBRARY", "/nonexistent/libnccl.so.2", 1);
  const std::string err = error_of([&] { comm_for_run("nccl", "cuda", *host, *be, &owned); });
  ::unsetenv("LEDGERLM_NCCL_LIBRARY");
  EXPECT_EQ(err.rfind("dist.comm = nccl: NCCL did not load (/nonexistent/libnccl.so.2: ", 0), 0u)
      << err;
  EXPECT_EQ(owned, nullptr);
}

// Where the NCCL Comm is built and the library loads (no GPU needed): a backend without a CUDA
// stream (the CPU's) is refused with that reason before NCCL is initialised.
TEST(CommSelect, TheNcclCommRefusesABackendWithoutAStream) {
  if (!comm_nccl_built()) GTEST_SKIP() << "skipped: this build has no NCCL Comm";
  std::string why;
  if (!nccl_library_open(nccl_library_names(), 2, &why))
    GTEST_SKIP() << "skipped: NCCL does not load here (" << why << ")";
  std::unique_ptr<Comm> host = comm_create_single();
  std::unique_ptr<Backend> cpu = backend_create_cpu(1);
  EXPECT_EQ(comm_create_nccl(*host, *cpu, &why), nullptr);
  EXPECT_EQ(why, "backend 'cpu' has no CUDA stream");
}

// Rank 0 of two, as a test double: the collectives answer as if the other rank said the same.
class TwoRanksAlike final : public Comm {
 public:
  std::string name() const override { return "mpi"; }
  int rank() const override { return 0; }
  int world() const override { return 2; }
  int local_rank() const override { return 0; }
  int local_world() const override { return 2; }
  void all_reduce_sum(Backend&, Tensor, int64_t) override {}
  void reduce_scatter_sum(Backend&, Tensor, int64_t) override {}
  void all_gather_in_place(Backend&, Tensor, int64_t) override {}
  void all_to_all_v(Backend&, Tensor, const std::vector<int64_t>&, Tensor,
                    const std::vector<int64_t>&) override {}
  void all_reduce_sum(double*, int) override {}
  void all_reduce_max(int64_t*, int) override {}
  void broadcast(void*, int64_t, int) override {}
  std::vector<std::string> all_gather_text(const std::string& mine) override {
    return {mine, mine};
  }
  void barrier() override {}
  [[noreturn]] void abort(int exit_code) override { std::exit(exit_code); }
};

// auto with two ranks on cuda, where NCCL does not load: the run keeps the host Comm and rank 0
// prints one line naming the first rank that lacks NCCL and why.
TEST(CommSelect, AutoFallsBackToTheHostCommWithOneLine) {
  if (!comm_nccl_built()) GTEST_SKIP() << "skipped: this build has no NCCL Comm";
  TwoRanksAlike host;
  std::unique_ptr<Backend> be = backend_create_cpu(1);
  std::unique_ptr<Comm> owned;
  ::setenv("LEDGERLM_NCCL_LIBRARY", "/nonexistent/libnccl.so.2", 1);
  ::testing::internal::CaptureStdout();
  Comm& chosen = comm_for_run("auto", "cuda", host, *be, &owned);
  const std::string out = ::testing::internal::GetCapturedStdout();
  ::unsetenv("LEDGERLM_NCCL_LIBRARY");
  EXPECT_EQ(&chosen, &host);
  EXPECT_EQ(owned, nullptr);
  EXPECT_EQ(out.rfind("dist.comm = auto: mpi for device tensors (rank 0: NCCL did not load "
                      "(/nonexistent/libnccl.so.2: ",
                      0),
            0u)
      << out;
  EXPECT_EQ(std::count(out.begin(), out.end(), '\n'), 1) << out;
}

TEST(CommSelect, ATimeoutLineSaysNcclDoesNotNameTheRank) {
  CommWatch w;
  w.begin_run(30.0, 100.0);
  w.begin(CommPhase::kTraining, 7, 100.0);
  EXPECT_EQ(w.unattributed_message(1, "NCCL", "all-gather"),
            "rank 1: the NCCL all-gather did not complete within 30 s (training step 7; "
            "dist.timeout_s = 30); NCCL does not say which rank is missing or stalled; ending "
            "the job");
}

}  // namespace
}  // namespace ledgerlm

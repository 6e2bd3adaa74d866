// The GPU suite: the device executor's step tests (tests/backend/device_step_cases.hpp, the same
// source as the CPU suite's system::omp_device run) on system::cuda, against the host fp64 step;
// then what only a GPU can show: no device allocation in a step, no device memory kept over many
// fits. Exits 77 (Meson's "skipped") with a message when no CUDA device is present.
#define DOCTEST_CONFIG_IMPLEMENT
#include <doctest/doctest.h>

#define DAFUSE_TEST_SYSTEM dafuse::system::cuda
#define DAFUSE_TEST_SUITE "device executor on system::cuda"
#include "../backend/device_step_cases.hpp"

#include <cuda_runtime.h>

#include <cstdio>

// Device allocations of this process so far (tests/cuda/device_allocations.cpp).
long dafuse_test_device_allocations();

TEST_SUITE("system::cuda only") {
  using namespace device_cases;

  TEST_CASE("a CUDA step allocates device memory when it is built and never in a step") {
    using step = device_step<relu_net, df::head::dann<df::schedule::ganin>, df::clip::global_norm,
                             df::optim::adam>;
    const df::fit_args args = adam_args();
    const long before = dafuse_test_device_allocations();
    step s(args);
    // The count sees the step's own buffers: the check below can fail.
    REQUIRE(dafuse_test_device_allocations() > before);
    const host_batch b = make_batch<step>(args, 0);
    load_batch(s, b);
    s.run();  // a first step may set up what the runtime does lazily
    const long built = dafuse_test_device_allocations();
    for (int k = 0; k < 50; ++k) s.run();
    CHECK(dafuse_test_device_allocations() == built);
  }

  TEST_CASE("replaying the captured step gives the bits of the step queued anew each time") {
    using step = device_step<mixed_net, df::head::dann<df::schedule::ganin>,
                             df::clip::per_module_norm, df::optim::adam>;
    df::fit_args args = adam_args();
    args.batch = 8;
    const df::data::dataset source = make_set<step>(40, df::data::domain::source, 1);
    const df::data::dataset target = make_set<step>(30, df::data::domain::target, 2);
    step captured(args), queued(args);
    queued.executor().capture_graphs(false);
    captured.load_resident(source, target);
    queued.load_resident(source, target);
    for (int k = 0; k < 25; ++k) {  // several epochs of both domains
      captured.enqueue();
      queued.enqueue();
    }
    const df::step_report a = captured.last_report(), b = queued.last_report();
    CHECK(a.label_loss == b.label_loss);
    CHECK(a.grad_norm == b.grad_norm);
    CHECK(a.lambda == b.lambda);
    CHECK(a.lr == b.lr);
    CHECK(captured.step_index() == 25);
    CHECK(parameters_of(captured) == parameters_of(queued));
    CHECK(optimizer_state_of(captured) == optimizer_state_of(queued));
  }

  TEST_CASE("many fits in one process leave the device's free memory where it was") {
    using step =
        device_step<relu_net, df::head::dann<df::schedule::ganin>, df::clip::none, df::optim::sgd>;
    df::fit_args args = sgd_args();
    args.steps = 5;
    const df::data::dataset source = make_set<step>(64, df::data::domain::source, 1);
    const df::data::dataset target = make_set<step>(64, df::data::domain::target, 2);
    (void)df::fit<step>(source, target, args);  // the runtime's and cuBLASLt's first-use set-up
    std::size_t free_before = 0, free_after = 0, total = 0;
    REQUIRE(cudaMemGetInfo(&free_before, &total) == cudaSuccess);
    for (int k = 0; k < 100; ++k) (void)df::fit<step>(source, target, args);
    REQUIRE(cudaMemGetInfo(&free_after, &total) == cudaSuccess);
    CHECK(free_after == free_before);
  }
}

int main(int argc, char** argv) {
  int devices = 0;
  const cudaError_t e = cudaGetDeviceCount(&devices);
  if (e != cudaSuccess || devices == 0) {
    std::printf("dafuse GPU tests skipped: no CUDA device (%s)\n",
                e != cudaSuccess ? cudaGetErrorString(e) : "none found");
    return 77;
  }
  cudaDeviceProp prop{};
  if (cudaGetDeviceProperties(&prop, 0) == cudaSuccess)
    std::printf("dafuse GPU tests on %s (sm_%d%d)\n", prop.name, prop.major, prop.minor);
  doctest::Context context(argc, argv);
  return context.run();
}

// The device executor's orchestration on the CPU: the step tests of device_step_cases.hpp on
// system::omp_device (Thrust's OpenMP system driven as a device), against the host fp64 step.
#define DAFUSE_TEST_SYSTEM dafuse::system::omp_device
#define DAFUSE_TEST_SUITE "device executor on system::omp_device"
#include <dafuse/backend/omp_device/executor.hpp>

#include "device_step_cases.hpp"

namespace backend_device_executor_test {}  // namespace backend_device_executor_test

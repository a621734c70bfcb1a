#include "loader/out_of_memory.h"

#include "stoke/process.h"

namespace stoke {

void FailNthLoaderAllocation(int64_t n) { AllocationFaults::Instance().FailNth(n); }

}  // namespace stoke

// Long, harmless work to queue ahead of an execute on a stream: a kernel that waits on the
// GPU's global timer.
#pragma once

#include "floe/plan.h"
#include "floe/status.h"

namespace floe::test {

// Enqueues a one-thread kernel that returns after `milliseconds` of wall time.
Status enqueue_spin(Stream stream, double milliseconds);

}  // namespace floe::test

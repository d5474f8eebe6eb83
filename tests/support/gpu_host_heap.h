// Host heap accounting for the allocation detector: the test binaries replace the global
// operator new and delete (every form) with versions that count, on the calling thread only,
// while that thread has opened a count. Off, they cost one thread-local load.
//
// malloc itself is not counted: the CUDA libraries call it internally (and CUPTI on every
// callback); floe is C++ and allocates through operator new.
#pragma once

#include <cstddef>

namespace floe::test::heap {

struct Counts {
  size_t allocations = 0;  // operator new, every form
  size_t bytes = 0;
  size_t deallocations = 0;  // operator delete of a non-null pointer, every form
};

// Starts counting on this thread from zero. Not nested.
void begin();
// Stops counting on this thread and returns what was seen since begin().
Counts end();

}  // namespace floe::test::heap

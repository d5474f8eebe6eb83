// The table floe._floe hands to floe._floe_torch in the capsule "floe._floe._C_API": the torch
// layer's C++ per-call path executes plans that _floe built, with no Python call in between, and
// neither module links the other's library (_floe knows no torch, _floe_torch links no floe).
#pragma once

#include <Python.h>

#include <cstddef>

namespace floe_py {

constexpr int kCApiVersion = 1;  // the torch layer refuses any other (a stale build)

struct CApi {
  int version;
  // The floe::Plan inside a _floe.Plan object; nullptr for any other object.
  const void* (*plan_of)(PyObject* plan);
  size_t (*workspace_bytes)(const void* plan);
  // Plan::execute on n addresses in TensorId order (the rest null). No Python inside: the
  // caller may hold the GIL or not. 0 on success; else -1, and raise_last (GIL held) raises
  // floe.FloeError with floe's message.
  int (*execute)(const void* plan, void* const* ptrs, int n, void* workspace, size_t workspace_size,
                 void* stream);
  void (*raise_last)();
};

}  // namespace floe_py

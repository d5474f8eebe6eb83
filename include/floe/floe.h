// floe: fused scaled-dot-product attention, forward and backward.
#pragma once

#include "floe/arguments.h"
#include "floe/merge.h"
#include "floe/plan.h"
#include "floe/problem.h"
#include "floe/status.h"
#include "floe/target.h"
#include "floe/tensor.h"

// Shared by the kernels of ops.cc; kjit_add_module's DEPENDS lists it, so an edit
// rebuilds the module.
#pragma once
#include <cmath>
#include <cstdint>

inline float squared(float v) { return v * v; }

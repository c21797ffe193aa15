"""Kernels built ahead of time by kjit_add_module (CMakeLists.txt) and loaded with
kjit.load: checked calls, keywords, defaults and returned outputs, with no
compiler on the machine."""

import os

import kjit

_module = kjit.load(os.path.join(os.path.dirname(os.path.abspath(__file__)), "_kernels.so"))

axpy = _module.axpy
rms_norm = _module.rms_norm
functions = _module.functions

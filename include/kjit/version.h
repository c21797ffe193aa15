// kjit/version.h — the library version (part of every cache key).
#ifndef KJIT_VERSION_H_
#define KJIT_VERSION_H_

#define KJIT_VERSION "0.1.0"

#endif  // KJIT_VERSION_H_

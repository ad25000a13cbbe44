// Names the calling thread as `top -H`, perf and /proc/PID/task/*/comm show it
// (at most 15 bytes are kept). Threads started from it (an OpenMP team) inherit
// the name. So a profile of kilnd under load says which of its threads spent
// the time: compute, the batch scheduler, a local-socket reader, gRPC's own.
#pragma once

#include <pthread.h>

namespace kiln::server {

inline void NameThisThread(const char* name) { pthread_setname_np(pthread_self(), name); }

}  // namespace kiln::server

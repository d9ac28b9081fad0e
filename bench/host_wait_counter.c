/* libmnddp_host_waits.so: counts the host waits on the GPU of a whole process, whichever library
 * makes them. Preloaded (LD_PRELOAD) by the GPU benchmark and the device check, it stands in front of
 * the CUDA runtime's blocking calls, counts each, and forwards it to the real one. mnddp reads the
 * count through mnddp_interposed_host_waits() (src/host_waits.cpp) and reports waits per step.
 * torch's .item(), its copies to the host and its synchronisations all end in one of these calls.
 * No CUDA header: the signatures are the runtime's, spelled with plain C types. */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>

static _Atomic uint64_t g_waits;

uint64_t mnddp_interposed_host_waits(void) { return atomic_load_explicit(&g_waits, memory_order_relaxed); }

/* The real function, found once (the runtime may be dlopen'ed after the process started). */
#define REAL(name, type)                                   \
  static type real_##name;                                 \
  if (real_##name == NULL) real_##name = (type)dlsym(RTLD_NEXT, #name)

typedef int (*stream_sync_fn)(void*);
typedef int (*device_sync_fn)(void);
typedef int (*event_sync_fn)(void*);
typedef int (*memcpy_fn)(void*, const void*, size_t, int);

int cudaStreamSynchronize(void* stream) {
  REAL(cudaStreamSynchronize, stream_sync_fn);
  atomic_fetch_add_explicit(&g_waits, 1, memory_order_relaxed);
  return real_cudaStreamSynchronize(stream);
}

int cudaDeviceSynchronize(void) {
  REAL(cudaDeviceSynchronize, device_sync_fn);
  atomic_fetch_add_explicit(&g_waits, 1, memory_order_relaxed);
  return real_cudaDeviceSynchronize();
}

int cudaEventSynchronize(void* event) {
  REAL(cudaEventSynchronize, event_sync_fn);
  atomic_fetch_add_explicit(&g_waits, 1, memory_order_relaxed);
  return real_cudaEventSynchronize(event);
}

/* cudaMemcpy (not ...Async) returns only once the copy is done, after the work queued before it. */
int cudaMemcpy(void* dst, const void* src, size_t bytes, int kind) {
  REAL(cudaMemcpy, memcpy_fn);
  atomic_fetch_add_explicit(&g_waits, 1, memory_order_relaxed);
  return real_cudaMemcpy(dst, src, bytes, kind);
}

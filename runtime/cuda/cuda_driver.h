/*
 * cuda_driver.h - the CUDA driver API and NVRTC, opened with dlopen on first use so libmscclrt
 * loads on machines with no GPU driver. One function table per library, resolved by versioned
 * symbol name (the ABI of a versioned symbol never changes), so this header needs no cuda.h.
 * Multicast (cuMulticast*) entries are resolved only when MSCCLRT_ENABLE_NVLS=1.
 *
 * Usage:  TRY(cu_load());  TRY(cu_check(cu.cuMemAlloc(&p, n), "cuMemAlloc"));
 * `cu` and `nvrtc` are filled once (pthread_once) and read-only afterwards.
 */
#ifndef MSCCLRT_CUDA_DRIVER_H
#define MSCCLRT_CUDA_DRIVER_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include "mscclrt.h"

/* ---- driver types (ABI-identical to cuda.h; named Cu* so both headers can coexist) ---------- */
typedef int CuResult;                       /* CUresult; 0 = CUDA_SUCCESS */
typedef int CuDevice;
typedef unsigned long long CuDevPtr;        /* CUdeviceptr */
typedef struct CUctx_st *CuContext;
typedef struct CUmod_st *CuModule;
typedef struct CUfunc_st *CuFunction;
typedef struct CUstream_st *CuStream;
typedef struct CUevent_st *CuEvent;
typedef struct CUgraph_st *CuGraph;
typedef struct CUgraphExec_st *CuGraphExec;
typedef struct { char reserved[64]; } CuIpcMemHandle;       /* CUipcMemHandle */
typedef unsigned long long CuMemHandle;                      /* CUmemGenericAllocationHandle */
typedef struct { int type; int id; } CuMemLocation;         /* CUmemLocation */
typedef struct {                                             /* CUmemAllocationProp */
    int type;                       /* CU_MEM_ALLOCATION_TYPE_PINNED = 1 */
    int requestedHandleTypes;       /* CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR = 1 */
    CuMemLocation location;         /* {CU_MEM_LOCATION_TYPE_DEVICE = 1, ordinal} */
    void *win32HandleMetaData;
    struct { unsigned char compressionType, gpuDirectRDMACapable; unsigned short usage;
             unsigned char reserved[4]; } allocFlags;
} CuMemAllocationProp;
typedef struct { CuMemLocation location; int flags; } CuMemAccessDesc;   /* flags: RW = 3 */
typedef struct {                                             /* CUlaunchAttribute */
    int id;                         /* CUlaunchAttributeID */
    char pad[4];
    union { char bytes[64]; int programmatic_serialization; } value;   /* CUlaunchAttributeValue */
} CuLaunchAttr;
typedef struct {                                             /* CUlaunchConfig */
    unsigned grid_x, grid_y, grid_z, block_x, block_y, block_z, smem;
    CuStream stream;
    CuLaunchAttr *attrs;
    unsigned nattrs;
} CuLaunchConfig;
typedef struct {                                             /* CUmulticastObjectProp */
    unsigned int numDevices;
    size_t size;
    unsigned long long handleTypes;
    unsigned long long flags;
} CuMulticastObjectProp;

enum {
    CU_OK = 0, CU_ERR_NOT_READY = 600, CU_ERR_PEER_ACCESS_ALREADY_ENABLED = 704,
    CU_ATTR_SM_COUNT = 16, CU_ATTR_PCI_BUS_ID = 33, CU_ATTR_PCI_DEVICE_ID = 34,
    CU_ATTR_PCI_DOMAIN_ID = 50,
    CU_ATTR_CC_MAJOR = 75, CU_ATTR_CC_MINOR = 76, CU_ATTR_VMM_SUPPORTED = 102,
    CU_ATTR_POSIX_FD_SUPPORTED = 103, CU_ATTR_MULTICAST_SUPPORTED = 132,
    CU_PTR_ATTR_DEVICE_ORDINAL = 9,
    CU_STREAM_FLAG_NON_BLOCKING = 1, CU_EVENT_FLAG_DISABLE_TIMING = 2,
    CU_CAPTURE_STATUS_NONE = 0, CU_CAPTURE_STATUS_ACTIVE = 1,
    CU_CAPTURE_MODE_GLOBAL = 0, CU_CAPTURE_MODE_THREAD_LOCAL = 1, CU_CAPTURE_MODE_RELAXED = 2,
    CU_HOSTALLOC_PORTABLE = 1, CU_HOSTALLOC_DEVICEMAP = 2,
    CU_IPC_LAZY_ENABLE_PEER_ACCESS = 1,
    CU_MEM_ALLOC_PINNED = 1, CU_MEM_LOC_DEVICE = 1, CU_MEM_HANDLE_POSIX_FD = 1,
    CU_MEM_ACCESS_RW = 3, CU_MEM_GRAN_MINIMUM = 0, CU_MEM_GRAN_RECOMMENDED = 1,
    CU_JIT_INFO_LOG_BUFFER = 3, CU_JIT_INFO_LOG_BUFFER_SIZE_BYTES = 4,
    CU_MC_GRAN_MINIMUM = 0, CU_MC_GRAN_RECOMMENDED = 1,   /* CUmulticastGranularity_flags */
};

/* X-macro: CU_FN(field, versioned symbol, return type, parameter list). Fields carry the plain
 * CUDA names so call sites read like CUDA code: cu.cuMemAlloc(&p, n). */
#define CU_DRIVER_FUNCTIONS(X) \
    X(cuInit, "cuInit", CuResult, (unsigned flags)) \
    X(cuDriverGetVersion, "cuDriverGetVersion", CuResult, (int *v)) \
    X(cuGetErrorName, "cuGetErrorName", CuResult, (CuResult e, const char **s)) \
    X(cuGetErrorString, "cuGetErrorString", CuResult, (CuResult e, const char **s)) \
    X(cuDeviceGet, "cuDeviceGet", CuResult, (CuDevice *d, int ordinal)) \
    X(cuDeviceGetCount, "cuDeviceGetCount", CuResult, (int *n)) \
    X(cuDeviceGetAttribute, "cuDeviceGetAttribute", CuResult, (int *v, int attr, CuDevice d)) \
    X(cuDeviceGetName, "cuDeviceGetName", CuResult, (char *name, int len, CuDevice d)) \
    X(cuDeviceCanAccessPeer, "cuDeviceCanAccessPeer", CuResult, (int *can, CuDevice d, CuDevice peer)) \
    X(cuDevicePrimaryCtxRetain, "cuDevicePrimaryCtxRetain", CuResult, (CuContext *c, CuDevice d)) \
    X(cuDevicePrimaryCtxRelease, "cuDevicePrimaryCtxRelease_v2", CuResult, (CuDevice d)) \
    X(cuCtxSetCurrent, "cuCtxSetCurrent", CuResult, (CuContext c)) \
    X(cuCtxGetCurrent, "cuCtxGetCurrent", CuResult, (CuContext *c)) \
    X(cuCtxGetDevice, "cuCtxGetDevice", CuResult, (CuDevice *d)) \
    X(cuCtxSynchronize, "cuCtxSynchronize", CuResult, (void)) \
    X(cuCtxEnablePeerAccess, "cuCtxEnablePeerAccess", CuResult, (CuContext peer, unsigned flags)) \
    X(cuMemAlloc, "cuMemAlloc_v2", CuResult, (CuDevPtr *p, size_t n)) \
    X(cuMemFree, "cuMemFree_v2", CuResult, (CuDevPtr p)) \
    X(cuMemHostAlloc, "cuMemHostAlloc", CuResult, (void **p, size_t n, unsigned flags)) \
    X(cuMemFreeHost, "cuMemFreeHost", CuResult, (void *p)) \
    X(cuMemHostGetDevicePointer, "cuMemHostGetDevicePointer_v2", CuResult, (CuDevPtr *d, void *h, unsigned flags)) \
    X(cuMemGetAddressRange, "cuMemGetAddressRange_v2", CuResult, (CuDevPtr *base, size_t *size, CuDevPtr p)) \
    X(cuPointerGetAttribute, "cuPointerGetAttribute", CuResult, (void *data, int attr, CuDevPtr p)) \
    X(cuMemcpyHtoD, "cuMemcpyHtoD_v2", CuResult, (CuDevPtr dst, const void *src, size_t n)) \
    X(cuMemcpyDtoH, "cuMemcpyDtoH_v2", CuResult, (void *dst, CuDevPtr src, size_t n)) \
    X(cuMemcpyDtoD, "cuMemcpyDtoD_v2", CuResult, (CuDevPtr dst, CuDevPtr src, size_t n)) \
    X(cuMemcpyAsync, "cuMemcpyAsync", CuResult, (CuDevPtr dst, CuDevPtr src, size_t n, CuStream s)) \
    X(cuMemcpyHtoDAsync, "cuMemcpyHtoDAsync_v2", CuResult, (CuDevPtr dst, const void *src, size_t n, CuStream s)) \
    X(cuMemcpyDtoHAsync, "cuMemcpyDtoHAsync_v2", CuResult, (void *dst, CuDevPtr src, size_t n, CuStream s)) \
    X(cuMemcpyDtoDAsync, "cuMemcpyDtoDAsync_v2", CuResult, (CuDevPtr dst, CuDevPtr src, size_t n, CuStream s)) \
    X(cuMemsetD8, "cuMemsetD8_v2", CuResult, (CuDevPtr p, unsigned char v, size_t n)) \
    X(cuMemsetD8Async, "cuMemsetD8Async", CuResult, (CuDevPtr p, unsigned char v, size_t n, CuStream s)) \
    X(cuMemsetD32Async, "cuMemsetD32Async", CuResult, (CuDevPtr p, unsigned v, size_t n, CuStream s)) \
    X(cuIpcGetMemHandle, "cuIpcGetMemHandle", CuResult, (CuIpcMemHandle *h, CuDevPtr p)) \
    X(cuIpcOpenMemHandle, "cuIpcOpenMemHandle_v2", CuResult, (CuDevPtr *p, CuIpcMemHandle h, unsigned flags)) \
    X(cuIpcCloseMemHandle, "cuIpcCloseMemHandle", CuResult, (CuDevPtr p)) \
    X(cuMemCreate, "cuMemCreate", CuResult, (CuMemHandle *h, size_t n, const CuMemAllocationProp *prop, unsigned long long flags)) \
    X(cuMemRelease, "cuMemRelease", CuResult, (CuMemHandle h)) \
    X(cuMemAddressReserve, "cuMemAddressReserve", CuResult, (CuDevPtr *p, size_t n, size_t align, CuDevPtr addr, unsigned long long flags)) \
    X(cuMemAddressFree, "cuMemAddressFree", CuResult, (CuDevPtr p, size_t n)) \
    X(cuMemMap, "cuMemMap", CuResult, (CuDevPtr p, size_t n, size_t off, CuMemHandle h, unsigned long long flags)) \
    X(cuMemUnmap, "cuMemUnmap", CuResult, (CuDevPtr p, size_t n)) \
    X(cuMemSetAccess, "cuMemSetAccess", CuResult, (CuDevPtr p, size_t n, const CuMemAccessDesc *d, size_t count)) \
    X(cuMemGetAllocationGranularity, "cuMemGetAllocationGranularity", CuResult, (size_t *g, const CuMemAllocationProp *prop, int option)) \
    X(cuMemExportToShareableHandle, "cuMemExportToShareableHandle", CuResult, (void *shh, CuMemHandle h, int type, unsigned long long flags)) \
    X(cuMemImportFromShareableHandle, "cuMemImportFromShareableHandle", CuResult, (CuMemHandle *h, void *osh, int type)) \
    X(cuMemRetainAllocationHandle, "cuMemRetainAllocationHandle", CuResult, (CuMemHandle *h, void *addr)) \
    X(cuModuleLoadData, "cuModuleLoadData", CuResult, (CuModule *m, const void *image)) \
    X(cuModuleUnload, "cuModuleUnload", CuResult, (CuModule m)) \
    X(cuModuleGetFunction, "cuModuleGetFunction", CuResult, (CuFunction *f, CuModule m, const char *name)) \
    X(cuOccupancyMaxActiveBlocksPerMultiprocessor, "cuOccupancyMaxActiveBlocksPerMultiprocessor", CuResult, (int *n, CuFunction f, int threads, size_t smem)) \
    X(cuModuleGetGlobal, "cuModuleGetGlobal_v2", CuResult, (CuDevPtr *p, size_t *bytes, CuModule m, const char *name)) \
    X(cuFuncSetAttribute, "cuFuncSetAttribute", CuResult, (CuFunction f, int attr, int v)) \
    X(cuLaunchKernel, "cuLaunchKernel", CuResult, (CuFunction f, unsigned gx, unsigned gy, unsigned gz, unsigned bx, unsigned by, unsigned bz, unsigned smem, CuStream s, void **params, void **extra)) \
    X(cuStreamCreate, "cuStreamCreate", CuResult, (CuStream *s, unsigned flags)) \
    X(cuStreamDestroy, "cuStreamDestroy_v2", CuResult, (CuStream s)) \
    X(cuStreamSynchronize, "cuStreamSynchronize", CuResult, (CuStream s)) \
    X(cuStreamQuery, "cuStreamQuery", CuResult, (CuStream s)) \
    X(cuStreamWaitEvent, "cuStreamWaitEvent", CuResult, (CuStream s, CuEvent e, unsigned flags)) \
    X(cuStreamWriteValue64, "cuStreamWriteValue64_v2", CuResult, (CuStream s, CuDevPtr addr, uint64_t v, unsigned flags)) \
    X(cuStreamIsCapturing, "cuStreamIsCapturing", CuResult, (CuStream s, int *status)) \
    X(cuStreamBeginCapture, "cuStreamBeginCapture_v2", CuResult, (CuStream s, int mode)) \
    X(cuStreamEndCapture, "cuStreamEndCapture", CuResult, (CuStream s, CuGraph *g)) \
    X(cuGraphInstantiate, "cuGraphInstantiateWithFlags", CuResult, (CuGraphExec *e, CuGraph g, unsigned long long flags)) \
    X(cuGraphLaunch, "cuGraphLaunch", CuResult, (CuGraphExec e, CuStream s)) \
    X(cuGraphExecDestroy, "cuGraphExecDestroy", CuResult, (CuGraphExec e)) \
    X(cuGraphDestroy, "cuGraphDestroy", CuResult, (CuGraph g)) \
    X(cuEventCreate, "cuEventCreate", CuResult, (CuEvent *e, unsigned flags)) \
    X(cuEventDestroy, "cuEventDestroy_v2", CuResult, (CuEvent e)) \
    X(cuEventRecord, "cuEventRecord", CuResult, (CuEvent e, CuStream s)) \
    X(cuEventSynchronize, "cuEventSynchronize", CuResult, (CuEvent e)) \
    X(cuEventQuery, "cuEventQuery", CuResult, (CuEvent e)) \
    X(cuEventElapsedTime, "cuEventElapsedTime", CuResult, (float *ms, CuEvent a, CuEvent b))

/* Multicast (NVLS). Resolved only with MSCCLRT_ENABLE_NVLS=1: on shared hosts a multicast object
 * can take the machine's GPUs out of service, so by default these stay NULL. */
#define CU_MULTICAST_FUNCTIONS(X) \
    X(cuMulticastCreate, "cuMulticastCreate", CuResult, (CuMemHandle *h, const CuMulticastObjectProp *p)) \
    X(cuMulticastAddDevice, "cuMulticastAddDevice", CuResult, (CuMemHandle h, CuDevice d)) \
    X(cuMulticastBindMem, "cuMulticastBindMem", CuResult, (CuMemHandle mc, size_t mcoff, CuMemHandle mem, size_t memoff, size_t n, unsigned long long flags)) \
    X(cuMulticastUnbind, "cuMulticastUnbind", CuResult, (CuMemHandle mc, CuDevice d, size_t mcoff, size_t n)) \
    X(cuMulticastGetGranularity, "cuMulticastGetGranularity", CuResult, (size_t *g, const CuMulticastObjectProp *p, int option)) \
    X(cuMulticastBindAddr, "cuMulticastBindAddr", CuResult, (CuMemHandle mc, size_t mcoff, CuDevPtr mem, size_t n, unsigned long long flags))

/* Optional entries: NULL when the driver is older; callers fall back. cuMemGetHandleForAddressRange
 * (CUDA 11.7) exports device memory as a dmabuf fd, which RDMA registration (net_ib.c) prefers;
 * cuLaunchKernelEx (CUDA 11.8) takes launch attributes (programmatic dependent launch,
 * exec_pdl.c). */
#define CU_OPTIONAL_FUNCTIONS(X) \
    X(cuMemGetHandleForAddressRange, "cuMemGetHandleForAddressRange", CuResult, (void *handle, CuDevPtr p, size_t n, int type, unsigned long long flags)) \
    X(cuThreadExchangeStreamCaptureMode, "cuThreadExchangeStreamCaptureMode", CuResult, (int *mode)) \
    X(cuLaunchKernelEx, "cuLaunchKernelEx", CuResult, (const CuLaunchConfig *config, CuFunction f, void **params, void **extra))
enum { CU_MEM_RANGE_HANDLE_DMA_BUF_FD = 1, CU_PTR_ATTR_BUFFER_ID = 18 };
enum { CU_LAUNCH_ATTR_PROGRAMMATIC_SERIALIZATION = 6 };   /* CU_LAUNCH_ATTRIBUTE_PROGRAMMATIC_STREAM_SERIALIZATION */
enum { CU_STREAM_CAPTURE_MODE_GLOBAL = 0, CU_STREAM_CAPTURE_MODE_RELAXED = 2 };

#define CU_TABLE_FIELD(field, sym, ret, params) ret (*field) params;
typedef struct CudaDriver {
    CU_DRIVER_FUNCTIONS(CU_TABLE_FIELD)
    CU_MULTICAST_FUNCTIONS(CU_TABLE_FIELD)
    CU_OPTIONAL_FUNCTIONS(CU_TABLE_FIELD)
    int version;             /* cuDriverGetVersion, e.g. 13000 */
    int multicast;           /* 1 when the multicast entries were resolved (NVLS enabled) */
} CudaDriver;

/* MSCCLRT_DEBUG=TRACE, subsystem ALLOC: logging wrappers around the allocation, free and
 * mapping entries (cu_trace.c); cu_open installs them */
void cu_trace_install(CudaDriver *d);

/* cuEventSynchronize / cuStreamSynchronize for the library's own threads: poll, yielding the
 * core between polls (cu_wait.c: the driver's own wait spins without yielding) */
CuResult cu_event_wait(CuEvent e);
CuResult cu_stream_wait(CuStream s);

/* The calling thread, one of the library's own (port proxy, socket transport, group
 * preparation, non-blocking init), stops interacting with other threads' CUDA-graph captures:
 * under a capture in the default global mode any other thread's potentially unsafe call
 * (allocations, module loads, stream and event queries) fails and invalidates the capture
 * (PyTorch and nccl-tests capture in that mode). cu_capture.c; a driver without the entry
 * point leaves the thread as it is. */
void cu_capture_relaxed(void);

/* Device dev's primary context, retained once per process and never released (cu_primary.c:
 * releasing the last reference would destroy the application's allocations with it). */
mscclrt_result cu_primary_ctx(CuDevice dev, CuContext *ctx);

/* ---- NVRTC ----------------------------------------------------------------------------------- */
typedef int NvrtcResult;                    /* nvrtcResult; 0 = NVRTC_SUCCESS */
typedef struct _nvrtcProgram *NvrtcProgram;
#define NVRTC_FUNCTIONS(X) \
    X(nvrtcVersion, "nvrtcVersion", NvrtcResult, (int *major, int *minor)) \
    X(nvrtcGetErrorString, "nvrtcGetErrorString", const char *, (NvrtcResult r)) \
    X(nvrtcCreateProgram, "nvrtcCreateProgram", NvrtcResult, (NvrtcProgram *p, const char *src, const char *name, int nheaders, const char *const *headers, const char *const *include_names)) \
    X(nvrtcDestroyProgram, "nvrtcDestroyProgram", NvrtcResult, (NvrtcProgram *p)) \
    X(nvrtcCompileProgram, "nvrtcCompileProgram", NvrtcResult, (NvrtcProgram p, int nopts, const char *const *opts)) \
    X(nvrtcGetProgramLogSize, "nvrtcGetProgramLogSize", NvrtcResult, (NvrtcProgram p, size_t *n)) \
    X(nvrtcGetProgramLog, "nvrtcGetProgramLog", NvrtcResult, (NvrtcProgram p, char *log)) \
    X(nvrtcGetCUBINSize, "nvrtcGetCUBINSize", NvrtcResult, (NvrtcProgram p, size_t *n)) \
    X(nvrtcGetCUBIN, "nvrtcGetCUBIN", NvrtcResult, (NvrtcProgram p, char *cubin))

typedef struct Nvrtc {
    NVRTC_FUNCTIONS(CU_TABLE_FIELD)
    int major, minor;        /* nvrtcVersion */
    char path[512];          /* the library that was opened */
} Nvrtc;
#undef CU_TABLE_FIELD

extern CudaDriver cu;        /* valid after cu_load() succeeded */
extern Nvrtc nvrtc;          /* valid after nvrtc_load() succeeded */

/* dlopen libcuda.so.1 and cuInit(0), once per process. MSCCLRT_ERR_UNAVAILABLE (with the
 * dlerror text) when there is no driver or no device; the same result on every later call. */
mscclrt_result cu_load(void);
/* dlopen libnvrtc (CUDA_HOME/lib64, /usr/local/cuda/lib64, then the default search), once. */
mscclrt_result nvrtc_load(void);
/* Identity of the NVRTC library nvrtc_load would open from an explicit directory (resolved
 * path, size, mtime) without loading it, so a kernel cache hit costs no dlopen. false when
 * NVRTC would come from the default search path (then only nvrtc_load tells the version). */
bool nvrtc_identity(char *buf, size_t len);
/* Turns a driver result into MSCCLRT_ERR_CUDA with "what: CUDA_ERROR_X (text)". CU_OK -> success. */
mscclrt_result cu_check(CuResult r, const char *what);
/* Same for NVRTC results. */
mscclrt_result nvrtc_check(NvrtcResult r, const char *what);
/* The PCI address of device d as sysfs names it ("dddd:bb:dd.0"); false where the driver cannot
 * tell. Needs cu_load(). */
bool cu_device_pci(CuDevice d, char *buf, size_t len);
/* Compute capability of an ordinal (e.g. 90 for sm_90); needs cu_load(). */
mscclrt_result cu_device_arch(int ordinal, int *arch);

#endif

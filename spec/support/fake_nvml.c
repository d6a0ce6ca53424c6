/* A stand-in for libnvidia-ml.so.1 with NVML's ABI, for specs on machines
 * without NVML (GPURUN_NVML_LIBRARY): two devices of known answers; the
 * second supports neither temperature, power nor clocks, as a device whose
 * NVML answers NVML_ERROR_NOT_SUPPORTED. FAKE_NVML_FAIL_INIT=1 makes
 * nvmlInit_v2 fail as without a driver. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef int ret;
#define OK 0
#define INVALID 2
#define NOT_SUPPORTED 3
#define DRIVER_NOT_LOADED 9

struct pci { char legacy[16]; unsigned domain, bus, device, id, sub; char bus_id[32]; };
struct memory { unsigned long long total, free, used; };

static int devices[2];
#define DEVICE(d) ((int *)(d) - devices)
#define CHECK(d) if (!(d) || DEVICE(d) < 0 || DEVICE(d) > 1) return INVALID

ret nvmlInit_v2(void) { return getenv("FAKE_NVML_FAIL_INIT") ? DRIVER_NOT_LOADED : OK; }
const char *nvmlErrorString(ret r) { return r == NOT_SUPPORTED ? "Not Supported" : "fake error"; }
ret nvmlSystemGetDriverVersion(char *v, unsigned n) { snprintf(v, n, "580.65.06"); return OK; }
ret nvmlSystemGetNVMLVersion(char *v, unsigned n) { snprintf(v, n, "13.580.65.06"); return OK; }
ret nvmlSystemGetCudaDriverVersion_v2(int *v) { *v = 13000; return OK; }
ret nvmlSystemGetProcessName(unsigned pid, char *name, unsigned n)
{
    (void)pid;
    snprintf(name, n, "gpurun");
    return OK;
}
ret nvmlDeviceGetCount_v2(unsigned *count) { *count = 2; return OK; }
ret nvmlDeviceGetHandleByIndex_v2(unsigned i, void **d)
{
    if (i > 1) return INVALID;
    *d = &devices[i];
    return OK;
}
ret nvmlDeviceGetName(void *d, char *s, unsigned n) { CHECK(d); snprintf(s, n, "Fake GPU %d", (int)DEVICE(d)); return OK; }
ret nvmlDeviceGetUUID(void *d, char *s, unsigned n)
{
    CHECK(d);
    snprintf(s, n, "GPU-0000000%d-1111-2222-3333-444444444444", (int)DEVICE(d));
    return OK;
}
ret nvmlDeviceGetPciInfo_v3(void *d, struct pci *p)
{
    CHECK(d);
    memset(p, 0, sizeof *p);
    p->bus = 0x19 + DEVICE(d);
    p->id = 0x233510de;
    snprintf(p->bus_id, sizeof p->bus_id, "00000000:%02X:00.0", p->bus);
    return OK;
}
ret nvmlDeviceGetMemoryInfo(void *d, struct memory *m)
{
    CHECK(d);
    m->total = 80ull << 30;
    m->used = 1ull << 30;
    m->free = m->total - m->used;
    return OK;
}
ret nvmlDeviceGetTemperature(void *d, int sensor, unsigned *t)
{
    CHECK(d);
    if (DEVICE(d) == 1) return NOT_SUPPORTED;
    *t = sensor == 0 ? 34 : 0;
    return OK;
}
ret nvmlDeviceGetPowerUsage(void *d, unsigned *mw) { CHECK(d); if (DEVICE(d) == 1) return NOT_SUPPORTED; *mw = 71250; return OK; }
ret nvmlDeviceGetPowerManagementLimit(void *d, unsigned *mw) { CHECK(d); if (DEVICE(d) == 1) return NOT_SUPPORTED; *mw = 700000; return OK; }
ret nvmlDeviceGetClockInfo(void *d, int clock, unsigned *mhz)
{
    CHECK(d);
    if (DEVICE(d) == 1) return NOT_SUPPORTED;
    *mhz = clock == 1 ? 1980 : clock == 2 ? 2619 : 0;
    return OK;
}
ret nvmlDeviceGetPerformanceState(void *d, int *s) { CHECK(d); *s = 0; return OK; }
ret nvmlDeviceGetCudaComputeCapability(void *d, int *major, int *minor) { CHECK(d); *major = 9; *minor = 0; return OK; }
ret nvmlDeviceGetArchitecture(void *d, unsigned *a) { CHECK(d); *a = 9; return OK; }
ret nvmlDeviceGetBrand(void *d, int *b) { CHECK(d); *b = 14; return OK; }
ret nvmlDeviceGetTopologyCommonAncestor(void *a, void *b, int *level) { CHECK(a); CHECK(b); *level = 40; return OK; }
ret nvmlDeviceGetP2PStatus(void *a, void *b, int caps, int *status)
{
    CHECK(a);
    CHECK(b);
    *status = caps == 0 ? 0 : 5;
    return OK;
}

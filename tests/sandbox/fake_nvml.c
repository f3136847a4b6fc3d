/*
 * A stand-in for the NVIDIA driver's libnvidia-ml.so.1 on sandbox hosts, which have no GPU:
 * just the NVML calls pynvml makes for the cuda_check role's facts (init, shutdown, error
 * strings, driver version, CUDA driver version, device count), answering with the versions
 * it is compiled with, and those `hostcheck job` samples while a job runs (device handles,
 * name, UUID, utilization, memory, PCIe throughput, compute processes), answering with what
 * the file named by $FAKE_NVML_STATE says at the time of the call. The real library asks the
 * kernel module; this one asks nothing.
 *
 *   gcc -shared -fPIC -o libnvidia-ml.so.1 fake_nvml.c \
 *       -DFAKE_NVML_DRIVER='"550.54.15"' -DFAKE_NVML_CUDA=12040 -DFAKE_NVML_GPUS=8
 *
 * -DFAKE_NVML_INIT_ERROR=9 makes init fail as a library without its kernel module does
 * (NVML_ERROR_DRIVER_NOT_LOADED). Return codes, strings and structures follow nvml.h.
 *
 * $FAKE_NVML_STATE: one line per GPU, its index then KEY=VALUE words, read again at each call
 * (write it whole and rename it over the old one):
 *
 *   0 util=95 memory_used=1073741824 pcie_tx=2000 pcie_rx=150000 pids=4242,4243
 *
 * util: percent of time a kernel ran; memory_used: bytes; pcie_tx, pcie_rx: KB/s, absent:
 * NVML_ERROR_NOT_SUPPORTED (as on GPUs without the counters); pids: its compute processes.
 * A GPU without a line (or no file) is idle: 0 %, 0 bytes, no counters, no processes.
 *
 * What hostcheck's gpu check reads, per GPU on the same line: remap_pending=1, remap_failed=1,
 * remap_corrected=N, remap_uncorrected=N (nvmlDeviceGetRemappedRows), nvlinks=N (links, 0: a
 * PCIe-only GPU) and nvlinks_down=N (the last N of them down), persistence=0, lost=1 (its
 * handle answers NVML_ERROR_GPU_IS_LOST), ecc_uncorrected=N (ECC on, N uncorrected errors since the
 * driver loaded and in the GPU's lifetime; nvmlDeviceGetTotalEccErrors). A line `* init_error=N` makes every nvmlInit fail
 * with N (18: the driver's library and kernel module differ, as after an upgrade without a
 * reboot). GPU i sits at PCI 0000:(0x18 + i):00.0 and is persistent, Gen4 x16 of Gen4 x16,
 * idle, without ECC (unless ecc_uncorrected is given), with 12 NVLinks up. Without $FAKE_NVML_STATE the file read is
 * FAKE_NVML_STATE_FILE (slurmd runs its health check with an environment of its own).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#ifndef FAKE_NVML_DRIVER
#define FAKE_NVML_DRIVER "550.54.15"
#endif
#ifndef FAKE_NVML_CUDA
#define FAKE_NVML_CUDA 12040 /* 1000 * major + 10 * minor: CUDA 12.4 */
#endif
#ifndef FAKE_NVML_GPUS
#define FAKE_NVML_GPUS 8
#endif
#ifndef FAKE_NVML_INIT_ERROR
#define FAKE_NVML_INIT_ERROR 0
#endif
#ifndef FAKE_NVML_NAME
#define FAKE_NVML_NAME "NVIDIA Fake GPU"
#endif
#ifndef FAKE_NVML_MEMORY
#define FAKE_NVML_MEMORY 85899345920ULL /* 80 GiB */
#endif
#define FAKE_NVML_MAX_PIDS 64
#ifndef FAKE_NVML_STATE_FILE
#define FAKE_NVML_STATE_FILE "/etc/fake-nvml/state"
#endif

enum {
    NVML_SUCCESS = 0,
    NVML_ERROR_UNINITIALIZED = 1,
    NVML_ERROR_INVALID_ARGUMENT = 2,
    NVML_ERROR_NOT_SUPPORTED = 3,
    NVML_ERROR_INSUFFICIENT_SIZE = 7,
    NVML_ERROR_DRIVER_NOT_LOADED = 9,
    NVML_ERROR_GPU_IS_LOST = 15,
    NVML_ERROR_LIB_RM_VERSION_MISMATCH = 18,
};

static int initialised;

static FILE *open_state(void) {
    const char *path = getenv("FAKE_NVML_STATE");
    return fopen(path != NULL ? path : FAKE_NVML_STATE_FILE, "r");
}

/* `* init_error=N` of the state file, else 0. */
static int runtime_init_error(void) {
    char line[4096];
    int error = 0;
    FILE *stream = open_state();
    if (stream == NULL)
        return 0;
    while (fgets(line, sizeof(line), stream) != NULL) {
        const char *found = strstr(line, "init_error=");
        if (line[0] == '*' && found != NULL)
            error = atoi(found + strlen("init_error="));
    }
    fclose(stream);
    return error;
}

static int init(void) {
    int error = FAKE_NVML_INIT_ERROR != 0 ? FAKE_NVML_INIT_ERROR : runtime_init_error();
    if (error != 0)
        return error;
    initialised++;
    return NVML_SUCCESS;
}

int nvmlInit_v2(void) { return init(); }
int nvmlInit(void) { return init(); }
int nvmlInitWithFlags(unsigned int flags) { (void)flags; return init(); }

int nvmlShutdown(void) {
    if (!initialised)
        return NVML_ERROR_UNINITIALIZED;
    initialised--;
    return NVML_SUCCESS;
}

const char *nvmlErrorString(int result) {
    switch (result) {
    case NVML_SUCCESS: return "Success";
    case NVML_ERROR_UNINITIALIZED: return "Uninitialized";
    case NVML_ERROR_INVALID_ARGUMENT: return "Invalid Argument";
    case NVML_ERROR_NOT_SUPPORTED: return "Not Supported";
    case NVML_ERROR_INSUFFICIENT_SIZE: return "Insufficient Size";
    case NVML_ERROR_DRIVER_NOT_LOADED: return "Driver Not Loaded";
    case NVML_ERROR_GPU_IS_LOST: return "GPU is lost";
    case NVML_ERROR_LIB_RM_VERSION_MISMATCH: return "RM has detected an NVML/RM version mismatch.";
    default: return "Unknown Error";
    }
}

int nvmlSystemGetDriverVersion(char *version, unsigned int length) {
    if (!initialised)
        return NVML_ERROR_UNINITIALIZED;
    if (version == NULL)
        return NVML_ERROR_INVALID_ARGUMENT;
    if (strlen(FAKE_NVML_DRIVER) + 1 > length)
        return NVML_ERROR_INSUFFICIENT_SIZE;
    snprintf(version, length, "%s", FAKE_NVML_DRIVER);
    return NVML_SUCCESS;
}

int nvmlSystemGetCudaDriverVersion(int *version) {
    if (!initialised)
        return NVML_ERROR_UNINITIALIZED;
    if (version == NULL)
        return NVML_ERROR_INVALID_ARGUMENT;
    *version = FAKE_NVML_CUDA;
    return NVML_SUCCESS;
}

int nvmlSystemGetCudaDriverVersion_v2(int *version) {
    return nvmlSystemGetCudaDriverVersion(version);
}

int nvmlDeviceGetCount_v2(unsigned int *count) {
    if (!initialised)
        return NVML_ERROR_UNINITIALIZED;
    if (count == NULL)
        return NVML_ERROR_INVALID_ARGUMENT;
    *count = FAKE_NVML_GPUS;
    return NVML_SUCCESS;
}

/* What hostcheck job samples. */

enum { NVML_PCIE_UTIL_TX_BYTES = 0, NVML_PCIE_UTIL_RX_BYTES = 1 };

typedef struct {
    unsigned int gpu;
    unsigned int memory;
} nvmlUtilization_t;

typedef struct {
    unsigned long long total;
    unsigned long long free;
    unsigned long long used;
} nvmlMemory_t;

typedef struct { /* nvmlProcessInfo_v2_t, which _v3 of the call fills too */
    unsigned int pid;
    unsigned long long usedGpuMemory;
    unsigned int gpuInstanceId;
    unsigned int computeInstanceId;
} nvmlProcessInfo_t;

struct fake_device {
    int index;
};

typedef struct fake_device *nvmlDevice_t;

static struct fake_device devices[FAKE_NVML_GPUS > 0 ? FAKE_NVML_GPUS : 1];

struct gpu_state {
    unsigned int util;
    unsigned long long memory_used;
    long long pcie[2]; /* KB/s, -1: not supported */
    unsigned int pids[FAKE_NVML_MAX_PIDS];
    unsigned int npids;
    unsigned int remap[4]; /* corrected, uncorrected, pending, failed */
    unsigned int nvlinks, nvlinks_down, persistence, lost;
    long long ecc_uncorrected; /* -1: ECC not supported */
};

/* The line of $FAKE_NVML_STATE for this GPU (an idle GPU when there is none). */
static void read_state(int index, struct gpu_state *state) {
    char line[4096];
    FILE *stream;
    memset(state, 0, sizeof(*state));
    state->pcie[0] = state->pcie[1] = -1;
    state->nvlinks = 12;
    state->persistence = 1;
    state->ecc_uncorrected = -1;
    if ((stream = open_state()) == NULL)
        return;
    while (fgets(line, sizeof(line), stream) != NULL) {
        char *word, *rest = line;
        char *end;
        long number = strtol(line, &end, 10);
        if (end == line || number != index)
            continue;
        rest = end;
        while ((word = strtok(rest, " \t\n")) != NULL) {
            char *value = strchr(word, '=');
            rest = NULL;
            if (value == NULL)
                continue;
            *value++ = '\0';
            if (strcmp(word, "util") == 0)
                state->util = (unsigned int)strtoul(value, NULL, 10);
            else if (strcmp(word, "memory_used") == 0)
                state->memory_used = strtoull(value, NULL, 10);
            else if (strcmp(word, "pcie_tx") == 0)
                state->pcie[NVML_PCIE_UTIL_TX_BYTES] = strtoll(value, NULL, 10);
            else if (strcmp(word, "pcie_rx") == 0)
                state->pcie[NVML_PCIE_UTIL_RX_BYTES] = strtoll(value, NULL, 10);
            else if (strcmp(word, "remap_corrected") == 0)
                state->remap[0] = (unsigned int)strtoul(value, NULL, 10);
            else if (strcmp(word, "remap_uncorrected") == 0)
                state->remap[1] = (unsigned int)strtoul(value, NULL, 10);
            else if (strcmp(word, "remap_pending") == 0)
                state->remap[2] = (unsigned int)strtoul(value, NULL, 10);
            else if (strcmp(word, "remap_failed") == 0)
                state->remap[3] = (unsigned int)strtoul(value, NULL, 10);
            else if (strcmp(word, "nvlinks") == 0)
                state->nvlinks = (unsigned int)strtoul(value, NULL, 10);
            else if (strcmp(word, "nvlinks_down") == 0)
                state->nvlinks_down = (unsigned int)strtoul(value, NULL, 10);
            else if (strcmp(word, "persistence") == 0)
                state->persistence = (unsigned int)strtoul(value, NULL, 10);
            else if (strcmp(word, "lost") == 0)
                state->lost = (unsigned int)strtoul(value, NULL, 10);
            else if (strcmp(word, "ecc_uncorrected") == 0)
                state->ecc_uncorrected = strtoll(value, NULL, 10);
            else if (strcmp(word, "pids") == 0) {
                char *pid = value;
                while (*pid != '\0' && state->npids < FAKE_NVML_MAX_PIDS) {
                    state->pids[state->npids++] = (unsigned int)strtoul(pid, &end, 10);
                    if (*end != ',')
                        break;
                    pid = end + 1;
                }
            }
        }
        break;
    }
    fclose(stream);
}

static int device_index(nvmlDevice_t device) {
    if (!initialised || device < devices || device >= devices + FAKE_NVML_GPUS)
        return -1;
    return (int)(device - devices);
}

int nvmlDeviceGetHandleByIndex_v2(unsigned int index, nvmlDevice_t *device) {
    struct gpu_state state;
    if (!initialised)
        return NVML_ERROR_UNINITIALIZED;
    if (device == NULL || index >= (unsigned int)FAKE_NVML_GPUS)
        return NVML_ERROR_INVALID_ARGUMENT;
    read_state((int)index, &state);
    if (state.lost)
        return NVML_ERROR_GPU_IS_LOST;
    devices[index].index = (int)index;
    *device = &devices[index];
    return NVML_SUCCESS;
}

int nvmlDeviceGetName(nvmlDevice_t device, char *name, unsigned int length) {
    if (device_index(device) < 0 || name == NULL)
        return NVML_ERROR_INVALID_ARGUMENT;
    if (strlen(FAKE_NVML_NAME) + 1 > length)
        return NVML_ERROR_INSUFFICIENT_SIZE;
    snprintf(name, length, "%s", FAKE_NVML_NAME);
    return NVML_SUCCESS;
}

int nvmlDeviceGetUUID(nvmlDevice_t device, char *uuid, unsigned int length) {
    int index = device_index(device);
    if (index < 0 || uuid == NULL)
        return NVML_ERROR_INVALID_ARGUMENT;
    if (length < 41)
        return NVML_ERROR_INSUFFICIENT_SIZE;
    snprintf(uuid, length, "GPU-fa4e0000-0000-0000-0000-%012d", index);
    return NVML_SUCCESS;
}

int nvmlDeviceGetUtilizationRates(nvmlDevice_t device, nvmlUtilization_t *utilization) {
    struct gpu_state state;
    int index = device_index(device);
    if (index < 0 || utilization == NULL)
        return NVML_ERROR_INVALID_ARGUMENT;
    read_state(index, &state);
    utilization->gpu = state.util;
    utilization->memory = state.util / 2;
    return NVML_SUCCESS;
}

int nvmlDeviceGetMemoryInfo(nvmlDevice_t device, nvmlMemory_t *memory) {
    struct gpu_state state;
    int index = device_index(device);
    if (index < 0 || memory == NULL)
        return NVML_ERROR_INVALID_ARGUMENT;
    read_state(index, &state);
    memory->total = FAKE_NVML_MEMORY;
    memory->used = state.memory_used < FAKE_NVML_MEMORY ? state.memory_used : FAKE_NVML_MEMORY;
    memory->free = memory->total - memory->used;
    return NVML_SUCCESS;
}

int nvmlDeviceGetPcieThroughput(nvmlDevice_t device, int counter, unsigned int *value) {
    struct gpu_state state;
    int index = device_index(device);
    if (index < 0 || value == NULL || counter < 0 || counter > 1)
        return NVML_ERROR_INVALID_ARGUMENT;
    read_state(index, &state);
    if (state.pcie[counter] < 0)
        return NVML_ERROR_NOT_SUPPORTED;
    *value = (unsigned int)state.pcie[counter];
    return NVML_SUCCESS;
}

int nvmlDeviceGetComputeRunningProcesses_v3(nvmlDevice_t device, unsigned int *count,
                                            nvmlProcessInfo_t *infos) {
    struct gpu_state state;
    unsigned int i;
    int index = device_index(device);
    if (index < 0 || count == NULL)
        return NVML_ERROR_INVALID_ARGUMENT;
    read_state(index, &state);
    if (*count < state.npids || (infos == NULL && state.npids > 0)) {
        *count = state.npids;
        return NVML_ERROR_INSUFFICIENT_SIZE;
    }
    for (i = 0; i < state.npids; i++) {
        infos[i].pid = state.pids[i];
        infos[i].usedGpuMemory = state.memory_used / state.npids;
        infos[i].gpuInstanceId = 0xFFFFFFFF;
        infos[i].computeInstanceId = 0xFFFFFFFF;
    }
    *count = state.npids;
    return NVML_SUCCESS;
}

int nvmlDeviceGetComputeRunningProcesses_v2(nvmlDevice_t device, unsigned int *count,
                                            nvmlProcessInfo_t *infos) {
    return nvmlDeviceGetComputeRunningProcesses_v3(device, count, infos);
}

/* What hostcheck's gpu check reads. */

typedef struct {
    char busIdLegacy[16];
    unsigned int domain;
    unsigned int bus;
    unsigned int device;
    unsigned int pciDeviceId;
    unsigned int pciSubSystemId;
    char busId[32];
} nvmlPciInfo_t;

int nvmlDeviceGetPciInfo_v3(nvmlDevice_t device, nvmlPciInfo_t *pci) {
    int index = device_index(device);
    if (index < 0 || pci == NULL)
        return NVML_ERROR_INVALID_ARGUMENT;
    memset(pci, 0, sizeof(*pci));
    pci->bus = 0x18 + (unsigned int)index;
    pci->pciDeviceId = 0x233010de;
    snprintf(pci->busId, sizeof(pci->busId), "00000000:%02X:00.0", pci->bus);
    snprintf(pci->busIdLegacy, sizeof(pci->busIdLegacy), "0000:%02X:00.0", pci->bus);
    return NVML_SUCCESS;
}

int nvmlDeviceGetPersistenceMode(nvmlDevice_t device, unsigned int *mode) {
    struct gpu_state state;
    int index = device_index(device);
    if (index < 0 || mode == NULL)
        return NVML_ERROR_INVALID_ARGUMENT;
    read_state(index, &state);
    *mode = state.persistence;
    return NVML_SUCCESS;
}

static int link_value(nvmlDevice_t device, unsigned int *value, unsigned int answer) {
    if (device_index(device) < 0 || value == NULL)
        return NVML_ERROR_INVALID_ARGUMENT;
    *value = answer;
    return NVML_SUCCESS;
}

int nvmlDeviceGetCurrPcieLinkGeneration(nvmlDevice_t d, unsigned int *v) { return link_value(d, v, 4); }
int nvmlDeviceGetMaxPcieLinkGeneration(nvmlDevice_t d, unsigned int *v) { return link_value(d, v, 4); }
int nvmlDeviceGetGpuMaxPcieLinkGeneration(nvmlDevice_t d, unsigned int *v) { return link_value(d, v, 4); }
int nvmlDeviceGetCurrPcieLinkWidth(nvmlDevice_t d, unsigned int *v) { return link_value(d, v, 16); }
int nvmlDeviceGetMaxPcieLinkWidth(nvmlDevice_t d, unsigned int *v) { return link_value(d, v, 16); }

int nvmlDeviceGetCurrentClocksEventReasons(nvmlDevice_t device, unsigned long long *reasons) {
    if (device_index(device) < 0 || reasons == NULL)
        return NVML_ERROR_INVALID_ARGUMENT;
    *reasons = 0x1ULL; /* idle */
    return NVML_SUCCESS;
}

int nvmlDeviceGetCurrentClocksThrottleReasons(nvmlDevice_t device, unsigned long long *reasons) {
    return nvmlDeviceGetCurrentClocksEventReasons(device, reasons);
}

int nvmlDeviceGetEccMode(nvmlDevice_t device, int *current, int *pending) {
    struct gpu_state state;
    int index = device_index(device);
    if (index < 0 || current == NULL || pending == NULL)
        return NVML_ERROR_INVALID_ARGUMENT;
    read_state(index, &state);
    if (state.ecc_uncorrected < 0)
        return NVML_ERROR_NOT_SUPPORTED;
    *current = *pending = 1; /* NVML_FEATURE_ENABLED */
    return NVML_SUCCESS;
}

/* errorType 0: corrected (always 0 here), 1: uncorrected; counterType 0: volatile, 1: aggregate
 * (both N). */
int nvmlDeviceGetTotalEccErrors(nvmlDevice_t device, int errorType, int counterType,
                                unsigned long long *count) {
    struct gpu_state state;
    int index = device_index(device);
    if (index < 0 || count == NULL || errorType < 0 || errorType > 1 || counterType < 0 ||
        counterType > 1)
        return NVML_ERROR_INVALID_ARGUMENT;
    read_state(index, &state);
    if (state.ecc_uncorrected < 0)
        return NVML_ERROR_NOT_SUPPORTED;
    *count = errorType == 1 ? (unsigned long long)state.ecc_uncorrected : 0;
    return NVML_SUCCESS;
}

int nvmlDeviceGetRemappedRows(nvmlDevice_t device, unsigned int *corrected,
                              unsigned int *uncorrected, unsigned int *pending,
                              unsigned int *failed) {
    struct gpu_state state;
    int index = device_index(device);
    if (index < 0 || !corrected || !uncorrected || !pending || !failed)
        return NVML_ERROR_INVALID_ARGUMENT;
    read_state(index, &state);
    *corrected = state.remap[0];
    *uncorrected = state.remap[1];
    *pending = state.remap[2];
    *failed = state.remap[3];
    return NVML_SUCCESS;
}

int nvmlDeviceGetNvLinkState(nvmlDevice_t device, unsigned int link, int *active) {
    struct gpu_state state;
    int index = device_index(device);
    if (index < 0 || active == NULL)
        return NVML_ERROR_INVALID_ARGUMENT;
    read_state(index, &state);
    if (state.nvlinks == 0)
        return NVML_ERROR_NOT_SUPPORTED;
    if (link >= state.nvlinks)
        return NVML_ERROR_INVALID_ARGUMENT;
    *active = link < state.nvlinks - state.nvlinks_down;
    return NVML_SUCCESS;
}

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

enum {
    NVML_SUCCESS = 0,
    NVML_ERROR_UNINITIALIZED = 1,
    NVML_ERROR_INVALID_ARGUMENT = 2,
    NVML_ERROR_NOT_SUPPORTED = 3,
    NVML_ERROR_INSUFFICIENT_SIZE = 7,
    NVML_ERROR_DRIVER_NOT_LOADED = 9,
};

static int initialised;

static int init(void) {
    if (FAKE_NVML_INIT_ERROR != 0)
        return FAKE_NVML_INIT_ERROR;
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
};

/* The line of $FAKE_NVML_STATE for this GPU (an idle GPU when there is none). */
static void read_state(int index, struct gpu_state *state) {
    char line[4096];
    const char *path = getenv("FAKE_NVML_STATE");
    FILE *stream;
    memset(state, 0, sizeof(*state));
    state->pcie[0] = state->pcie[1] = -1;
    if (path == NULL || (stream = fopen(path, "r")) == NULL)
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
    if (!initialised)
        return NVML_ERROR_UNINITIALIZED;
    if (device == NULL || index >= (unsigned int)FAKE_NVML_GPUS)
        return NVML_ERROR_INVALID_ARGUMENT;
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

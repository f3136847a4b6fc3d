/*
 * A stand-in for the NVIDIA driver's libnvidia-ml.so.1 on sandbox hosts, which have no GPU:
 * just the NVML calls pynvml makes for the cuda_check role's facts (init, shutdown, error
 * strings, driver version, CUDA driver version, device count), answering with the versions
 * it is compiled with. The real library asks the kernel module; this one asks nothing.
 *
 *   gcc -shared -fPIC -o libnvidia-ml.so.1 fake_nvml.c \
 *       -DFAKE_NVML_DRIVER='"550.54.15"' -DFAKE_NVML_CUDA=12040 -DFAKE_NVML_GPUS=8
 *
 * -DFAKE_NVML_INIT_ERROR=9 makes init fail as a library without its kernel module does
 * (NVML_ERROR_DRIVER_NOT_LOADED). Return codes and strings follow nvml.h.
 */
#include <stdio.h>
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

enum {
    NVML_SUCCESS = 0,
    NVML_ERROR_UNINITIALIZED = 1,
    NVML_ERROR_INVALID_ARGUMENT = 2,
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

// cudaprobe: what a container's process can do with the GPU it was given,
// through the CUDA driver API alone (libcuda.so.1, which the CDI spec
// mounts; the image brings only libc). It prints one fact a line:
//
//   dlopen libcuda.so.1 ok            (or: dlopen libcuda.so.1 error <dlerror>)
//   init <CUresult name>
//   devices <count>
//   device <i> <name>|<total MiB>|GPU-<uuid>
//   alloc <MiB> <CUresult name>       (one per argument, each freed after)
//
// and exits 0 whenever it could print, so the caller reads the facts.
// Build: gcc -O2 -o cudaprobe cudaprobe.c -ldl (hack/gpu/node-bundle.sh).
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef int CUresult;
typedef int CUdevice;
typedef void *CUcontext;
typedef unsigned long long CUdeviceptr;
typedef struct { unsigned char bytes[16]; } CUuuid;

static const char *(*errName)(CUresult, const char **);

static const char *name(CUresult r) {
	const char *s = NULL;
	if (errName && errName(r, &s) == 0 && s) return s;
	static char buf[32];
	snprintf(buf, sizeof buf, "CUresult(%d)", r);
	return buf;
}

int main(int argc, char **argv) {
	void *h = dlopen("libcuda.so.1", RTLD_NOW);
	if (!h) {
		printf("dlopen libcuda.so.1 error %s\n", dlerror());
		return 0;
	}
	printf("dlopen libcuda.so.1 ok\n");
	CUresult (*cuInit)(unsigned) = dlsym(h, "cuInit");
	CUresult (*cuDeviceGetCount)(int *) = dlsym(h, "cuDeviceGetCount");
	CUresult (*cuDeviceGet)(CUdevice *, int) = dlsym(h, "cuDeviceGet");
	CUresult (*cuDeviceGetName)(char *, int, CUdevice) = dlsym(h, "cuDeviceGetName");
	CUresult (*cuDeviceTotalMem)(size_t *, CUdevice) = dlsym(h, "cuDeviceTotalMem_v2");
	CUresult (*cuDeviceGetUuid)(CUuuid *, CUdevice) = dlsym(h, "cuDeviceGetUuid_v2");
	CUresult (*cuCtxCreate)(CUcontext *, unsigned, CUdevice) = dlsym(h, "cuCtxCreate_v2");
	CUresult (*cuMemAlloc)(CUdeviceptr *, size_t) = dlsym(h, "cuMemAlloc_v2");
	CUresult (*cuMemFree)(CUdeviceptr) = dlsym(h, "cuMemFree_v2");
	errName = dlsym(h, "cuGetErrorName");
	if (!cuInit || !cuDeviceGetCount || !cuDeviceGet || !cuDeviceGetName || !cuDeviceTotalMem ||
	    !cuDeviceGetUuid || !cuCtxCreate || !cuMemAlloc || !cuMemFree) {
		printf("dlsym error %s\n", dlerror());
		return 0;
	}
	CUresult r = cuInit(0);
	printf("init %s\n", name(r));
	if (r != 0) return 0;
	int count = 0;
	if ((r = cuDeviceGetCount(&count)) != 0) {
		printf("devices error %s\n", name(r));
		return 0;
	}
	printf("devices %d\n", count);
	for (int i = 0; i < count; i++) {
		CUdevice d;
		char nm[256] = "";
		size_t total = 0;
		CUuuid u;
		memset(&u, 0, sizeof u);
		if (cuDeviceGet(&d, i) != 0) continue;
		cuDeviceGetName(nm, sizeof nm, d);
		cuDeviceTotalMem(&total, d);
		cuDeviceGetUuid(&u, d);
		const unsigned char *b = u.bytes;
		printf("device %d %s|%zu|GPU-%02x%02x%02x%02x-%02x%02x-%02x%02x-%02x%02x-%02x%02x%02x%02x%02x%02x\n", i, nm,
		       total >> 20, b[0], b[1], b[2], b[3], b[4], b[5], b[6], b[7], b[8], b[9], b[10], b[11], b[12], b[13],
		       b[14], b[15]);
	}
	if (count == 0 || argc < 2) return 0;
	CUdevice d;
	CUcontext ctx;
	cuDeviceGet(&d, 0);
	if ((r = cuCtxCreate(&ctx, 0, d)) != 0) {
		printf("context %s\n", name(r));
		return 0;
	}
	for (int i = 1; i < argc; i++) {
		long mib = atol(argv[i]);
		CUdeviceptr p = 0;
		r = cuMemAlloc(&p, (size_t)mib << 20);
		printf("alloc %ld %s\n", mib, name(r));
		if (r == 0) cuMemFree(p);
	}
	return 0;
}

// Package node runs gpuadmit's end-to-end tests on a real node: the
// project's control plane (package cluster) joined by one kubelet v1.37.0
// with containerd v2.4 and runc on this machine, running real containers.
// hack/node-binaries.sh builds the node next to the control plane in
// test/e2e/.bin/<version>/; `make test` runs it and then this package:
//
//	./hack/e2e-binaries.sh && ./hack/node-binaries.sh
//	GPUADMIT_REQUIRE_E2E=1 go test -count=1 -timeout 15m -v ./test/e2e/node -run Kubelet
//
// Without root or without the binaries the tests skip, saying why and
// what builds them; under GPUADMIT_REQUIRE_E2E=1 they fail instead. One
// node runs per machine: Check refuses a machine where /var/lib/kubelet or
// /run/containerd is in use or the kubelet's ports (10250, 10248) are taken.
//
// A test reaches the node through Node: its Client, pods of BusyboxPod
// (hostNetwork, imagePullPolicy Never), Logs and Exec through the API
// server and the kubelet (what kubectl logs and exec do), Ctr
// for containerd, Import for images of its own (Image writes an OCI layout
// archive from files on this machine, no image builder involved),
// RestartKubelet and RestartContainerd, Reboot (reboot.go: the kubelet
// and containerd stop, every container is killed, what a reboot loses is
// wiped: /run/containerd, containerd's state, every mount under
// /var/lib/kubelet, the kubelet's cgroups and gpuadmit's CDI specs in
// /var/run/cdi, and only those of /var/run/cdi's files; /var/lib/kubelet
// with the kubelet's and the DRA driver's checkpoints, containerd's images
// and the fake driver root stay; then both start again), NVIDIARuntime for a pod that runs
// under NVIDIA's container runtime (below), and CDISpecDir, a CDI spec
// directory of its own that stands in for /etc/cdi. Start and Stop bracket the package
// (TestMain); Stop kills every container and unmounts and removes what the
// node left under /var/lib/kubelet, /run/containerd and its temp directory
// (checked against /proc/self/mountinfo, and nothing is removed while
// something below is still mounted), its cgroups, its log links and gpuadmit's CDI specs in /var/run/cdi.
//
// gpuadmit's node agent runs on the node as its DaemonSets do
// (agent.go): BuildAgentImage builds cmd/agent with the fake NVML of
// package fakegpu (-tags gpuadmit_fakenvml; the shipped agent does not link
// it) and imports it with exactly the shared libraries ldd names;
// NewFakeGPUs makes a driver root in the node's directory (mknod'd
// /dev/nvidia<i>, nvidiactl, UVM, and for a GPU in MIG mode its
// instances' nvidia-caps nodes and the fake /proc/driver below; empty
// versioned libraries; the real nvidia-cdi-hook hack/node-binaries.sh
// builds) with the fake NVML's
// configuration, the NVML readings its GPUs answer as, and the control
// file a test edits to lose or fail a GPU; DeployAgent renders
// deploy/agent or deploy/dra with kustomize (.bin/tools) and creates it as
// shipped but for a test overlay of the DaemonSet: the image, never
// pulled; the host's network with KUBERNETES_SERVICE_HOST/_PORT set to the
// API server's loopback address; --driver-root and the hook path in the
// fake root and --fake-nvml; of a kustomization's DaemonSets only the
// agent's named one runs (in MPS mode the control daemon's DaemonSet would
// run NVIDIA's daemon, which needs a GPU: the MPS test writes its host
// directories and recorded limits instead). The agent runs as the
// manifests' ServiceAccount under their RBAC and ValidatingAdmissionPolicies.
// Two things the node needed for it:
//   - The DaemonSets mount the driver root with HostToContainer
//     propagation, which containerd refuses on a private mount, and these
//     machines' / is private (a node's is shared): the fake root is made
//     a shared bind mount of its own, unmounted when the test ends.
//   - GPU pods run in kube-system, which gpuadmit's webhook (running in
//     this control plane) leaves alone, written as the webhook would have
//     rewritten them; the DRA share template is created with the identity
//     of gpuadmit's controller, the only writer deploy/dra's policies let
//     name gpuadmit's DeviceClasses.
//
// The Install tests (install.go, install_test.go; -run Install) install
// gpuadmit on the node as docs/install.md tells a newcomer, and uninstall it:
// that page marks each tested block of commands with an HTML comment
// (<!-- install-test: NAME -->), and the tests run those commands with
// bash in a copy of the checkout (what git ls-files lists), with the
// repository's kubectl v1.37.0 (hack/e2e-binaries.sh), helm (.bin/tools)
// and the node's ctr first on PATH and the cluster's admin kubeconfig:
// `make images` and `ctr images import`, `gpuadmit certs`, `kubectl apply
// -k` (or `helm install`), `kubectl rollout status`, the examples, then
// the uninstall. They change only what this machine needs, each change a
// Substitution that must match a command of that page: `--ip 127.0.0.1` for the
// certificate, and an overlay of dev-loopback (for Helm, a post-renderer)
// with machinePatches, because pods here have the host's network only and
// there is no kube-proxy: both Deployments get KUBERNETES_SERVICE_HOST and
// _PORT (the API server's loopback address), the controller runs on the
// host network too (one replica, ports 8090 and 8091). Before installing,
// a test takes out the gpuadmit the control plane starts with (its
// in-process webhook and controller, the webhook configuration envtest
// registered, deploy/base's namespace, accounts, RBAC and admission
// policies) and puts it back when it ends; the control plane also runs the
// deployment controller for them. What a user sees is checked against
// `gpuadmit mutate`'s offline decisions (package offline) for every example
// pod and examples/deployment.yaml: the pods as created, as `kubectl get -o
// yaml` prints them and as `kubectl describe` shows them, the denials'
// messages, a GPUDenied or GPUWarning Event naming each pod in `kubectl
// events`; after the uninstall no object is left that was not there before,
// none that was is gone, and the webhook's and controller's ports are free.
//
// What a real node needed on these machines (cgroup v1, no
// CAP_SYS_RESOURCE, no container image registry):
//   - containerd: configuration version 4, its root and state under a temp
//     directory, but its socket, the shims' sockets (s/) and runc's state
//     in /run/containerd, which v2.4 fixes; restrict_oom_score_adj = true in
//     the CRI runtime section, without which every sandbox fails (writing
//     a lower oom_score_adj needs CAP_SYS_RESOURCE); runc by BinaryName
//     and on containerd's PATH (ctr run names no binary); NRI disabled;
//     imports = [] so no host configuration leaks in. CDI is always on,
//     spec directories /etc/cdi and /var/run/cdi.
//   - CNI: one loopback-only configuration. Pods use hostNetwork: true,
//     but without any configuration containerd reports the network not
//     ready and the node never becomes Ready.
//   - Images: containerd's default sandbox image name
//     (registry.k8s.io/pause:3.10.2, also pinned in the configuration)
//     holding a tiny static pause, and Debian's busybox-static, both
//     imported with `ctr -n k8s.io images import`; pods use
//     imagePullPolicy: Never, and image GC runs only at a full disk.
//   - kubelet: failCgroupV1: false (v1.37 refuses cgroup v1 otherwise),
//     cgroupDriver: cgroupfs, failSwapOn: false, tiny eviction thresholds
//     on a shared machine, its API on 127.0.0.1:10250 with anonymous
//     access and AlwaysAllow (only this machine reaches it), a client
//     certificate for system:node:<name> in system:nodes signed by the
//     cluster's client CA. Its root stays /var/lib/kubelet because device
//     plugins and DRA drivers find it there.
//   - Addresses: the kubelet refuses a loopback node IP (it takes the
//     default route's interface as InternalIP), so the API server reaches
//     it by the Hostname address, the node's name: "localhost", which
//     resolves to 127.0.0.1 everywhere (--kubelet-preferred-address-types
//     Hostname). The API server runs with --endpoint-reconciler-type none,
//     as its advertised address is no endpoint a pod could reach; a pod
//     that talks to the API server (an agent's DaemonSet, hostNetwork) sets
//     KUBERNETES_SERVICE_HOST and KUBERNETES_SERVICE_PORT to the API
//     server's loopback address itself, as there is no kube-proxy.
//   - NVIDIA's runtime: nvidia-container-runtime and nvidia-cdi-hook from
//     the container toolkit module (the version gpuadmit's go.mod pins for
//     nvcdi; cgo, as go-nvml dlopens NVML), registered when BinDir has the
//     runtime as two runc handlers with a RuntimeClass each: "nvidia"
//     (accept-nvidia-visible-devices-envvar-when-unprivileged = false) and
//     "nvidia-envvar" (= true, the toolkit's default). The runc shim passes
//     the runtime no environment of its own and the toolkit reads
//     $NVIDIA_CTK_CONFIG_FILE_PATH, else
//     $XDG_CONFIG_HOME/nvidia-container-runtime/config.toml, else /etc's:
//     each handler's BinaryName is a script that sets the first and execs
//     the runtime, so this machine's /etc stays untouched. Its config: mode
//     "cdi" (legacy mode execs nvidia-container-cli, libnvidia-container, C,
//     not built here); runtimes = [runc from BinDir] (by default it looks
//     for runc or crun on PATH); spec-dirs = CDISpecDir, /etc/cdi,
//     /var/run/cdi; a debug log in LogDir, where it says what it injected
//     or ignored. In cdi mode NVIDIA_VISIBLE_DEVICES=<v> asks for the CDI
//     device nvidia.com/gpu=<v> (default-kind), so the node needs the spec
//     an admin writes with nvidia-ctk cdi generate: the test makes it with
//     nvcdi (index and UUID names, the "all" device) from cditest's fake
//     driver root, its hooks naming the real nvidia-cdi-hook, whose hooks
//     (create-symlinks, update-ldcache, enable-cuda-compat, ...) run in a
//     busybox container without failing it. A test runs a pod under it by
//     setting the pod's spec.runtimeClassName to the RuntimeClass of
//     n.NVIDIARuntime(false) (or of n.NVIDIARuntime(true), the default).
//   - Control plane: authorization Node,RBAC, NodeRestriction and
//     ServiceAccount admission (envtest turns the latter off); the
//     controller-manager runs the node-lifecycle controller (it lifts the
//     node.kubernetes.io/not-ready taint), the resource-claim controller,
//     and the root-CA publisher with --root-ca-file (kube-root-ca.crt,
//     which every ServiceAccount token volume projects), and the
//     device-taint eviction controller (DRADeviceTaints is GA and on by
//     default in v1.37; the controller only needs naming), which evicts the
//     pods of claims whose device the DRA driver tainted NoExecute
//     (gpu.gpuadmit.io/gone), a lost GPU's or a deleted MIG instance's.
//     kwok is not run: it would take the real node over.
//
// The upgrade of the device-plugin agent from the env-only strategy
// (upgrade_test.go) runs the agent before 14f3754 as a stand-in,
// envOnlyPlugin: a device plugin in the test's process that registers
// gpuadmit's resource with the agent's device IDs and answers Allocate as
// that agent did (NVIDIA_VISIBLE_DEVICES and the memory limit, nothing
// else); that agent itself predates the fake NVML and is not built.
//
// A pod on a MIG device (mig_test.go): nvcdi v1.20.2 makes a MIG device's
// edits in internal/platform-support/dgpu.NewForMigDevice, which its MIG
// spec generator (pkg/nvcdi/mig-device-nvml.go) calls without WithMIGCaps,
// so the MIG capability minors come from nvcaps.NewMigCaps: the host's
// /proc/driver/nvidia-caps/mig-minors, whatever WithDriverRoot and
// WithDevRoot say (only the MIG management devices "config" and
// "monitor", lib-mig-caps.go, read that file under the driver root).
// Without the NVIDIA kernel module there is no such file and Prepare fails
// ("error getting MIG capability device paths"). Nothing gpuadmit passes
// reaches it (WithMIGCaps is in an internal package), and runc v1.5.2
// refuses to mount anything under a container's /proc but lxcfs's few
// files (checkProcMount), so a pod spec cannot give the agent a fake one.
// So the agent of the test build mounts it itself: NewFakeGPUs writes, for
// a GPU in MIG mode, the driver's mig-minors file (fakegpu.MIGMinors) in a
// directory of the fake NVML's that stands for /proc/driver, and mknod's
// the nvidia-caps nodes of each GPU instance and its compute instance 0
// (/dev/nvidia-caps/nvidia-cap<minor>, major fakegpu.MajorCaps) in the
// fake root, where nvcdi looks them up under the dev root (it reads no
// major from /proc/devices; only nvidia-ctk's create-dev-char-symlinks
// does); the agent built with -tags gpuadmit_fakenvml, privileged, makes
// its container's /proc a private mount and bind-mounts that directory
// over /proc/driver (fakegpu.MountProcDriver, only as its container's
// first process, never where a real driver's nvidia-caps is there). The
// fake NVML answers what go-nvlib's MigDevice.GetProfile and nvcdi ask of
// a MIG device (by UUID, its compute instance, attributes, the GPU
// instance by ID). The shipped agent has none of this.
package node

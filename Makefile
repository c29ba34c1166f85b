# gpuadmit's commands for people. The two that matter:
#   make run   decide for an example pod with the embedded default policies
#   make test  install what the tests need, then run every test
GO ?= go
# go-nvml's headers mark NVML calls gpuadmit does not use as deprecated; keep
# cgo's warnings about them out of the build log.
export CGO_CFLAGS ?= -O2 -g -Wno-deprecated-declarations

.PHONY: run test test-node build images scheduler bench bench-admission bench-packing dev-cluster dev-cluster-down report-png

run:
	$(GO) run ./cmd/gpuadmit mutate -f examples/pods/hami-memory.yaml --nodes examples/nodes.yaml --namespace examples/namespace.yaml

# test installs etcd (Debian's etcd-server), builds kube-apiserver,
# kube-scheduler and kube-controller-manager from k8s.io/kubernetes and kwok
# (cached in test/e2e/.bin by version), installs helm, kustomize and opa
# (.bin/tools; like kwok, from the control plane's module,
# test/e2e/tools) and promtool (Debian's prometheus package), then runs vet
# and every test:
# unit, golden, Rego, fuzz seeds, deploy renders, the Prometheus rules'
# promtool tests, and the end-to-end tests against the real control plane.
# The end-to-end package runs on its own with -v so its report (the API
# server's admission latency for gpuadmit, the quota edit delay) is in the log.
# The scheduler module (gpuadmit-scheduler, which carries k8s.io/kubernetes)
# is vetted and tested on its own, a 50-node run in upstream's scheduler_perf
# harness among its tests (it runs etcd, so it must not skip here); the
# end-to-end tests build its binary.
# Last, the real-node tests (test/e2e/node, as root): the control plane
# joined by a kubelet with containerd and runc, which hack/node-binaries.sh
# builds and caches beside the control plane.
#
# Every build in make test is -trimpath (GOFLAGS), as the images', the
# agent's and the control plane's builds are: a package compiles once for
# all of them. The modules that build Kubernetes (test/e2e/tools, scheduler,
# the Kueue module's shared libraries) pin the same versions of what they share
# with gpuadmit's module, for the same reason (hack/modules_test.go keeps
# them so): with the flags and versions apart, a cold run compiled two
# thirds more Go source (309 MB against 186, counted over the packages each
# build lists). The tests run with -vet=off: go vet has just run every
# analyzer on the same packages, of which go test's own vet is a subset.
# Test binaries link without DWARF (-ldflags=-w; a panic's stack trace
# needs none): a third less link time for each of some fifty test binaries.
test test-node: export GOFLAGS += -trimpath -ldflags=-w
test:
	./hack/tools.sh >/dev/null
	./hack/e2e-binaries.sh >/dev/null
	./hack/node-binaries.sh >/dev/null
	$(GO) vet ./...
	cd scheduler && $(GO) vet ./...
	cd bench && $(GO) vet ./...
	GPUADMIT_REQUIRE_TOOLS=1 $(GO) test -count=1 -vet=off $$($(GO) list ./... | grep -v -e '/test/e2e$$' -e '/test/e2e/node$$')
	cd scheduler && GPUADMIT_REQUIRE_TOOLS=1 $(GO) test -count=1 -vet=off ./...
	cd bench && GPUADMIT_REQUIRE_TOOLS=1 $(GO) test -count=1 -vet=off ./...
	GPUADMIT_REQUIRE_TOOLS=1 GPUADMIT_REQUIRE_E2E=1 $(GO) test -count=1 -vet=off -timeout 20m -v ./test/e2e/
	$(MAKE) test-node

# test-node runs the real-node tests alone (root; a minute or so once the
# binaries are built), the Install tests among them, which run docs/install.md's
# install with kubectl (hack/e2e-binaries.sh) and helm (hack/tools.sh). The
# whole package took 633 s on the shared two-core machine, the Install tests
# 221 s of it: 20 minutes leave room for a busier machine.
test-node:
	./hack/tools.sh >/dev/null
	./hack/e2e-binaries.sh >/dev/null
	./hack/node-binaries.sh >/dev/null
	GPUADMIT_REQUIRE_E2E=1 $(GO) test -count=1 -timeout 20m -v ./test/e2e/node/

build:
	$(GO) build -o bin/ ./cmd/...

# report-png renders `gpuadmit report -o html` of the example cluster
# (examples/nodes.yaml, the pods of pkg/report/testdata/pods.yaml, example
# prices) to docs/report.png with headless Chromium (Debian's chromium
# package: apt-get install chromium). Not part of make test.
CHROMIUM ?= chromium
report-png:
	mkdir -p .bin
	$(GO) run ./cmd/gpuadmit report --nodes examples/nodes.yaml --pods pkg/report/testdata/pods.yaml \
		--price A100-80GB=1.8 --price H100-80GB=2.9 --price H200-141GB=3.5 --price T4=0.35 -o html > .bin/report.html
	$(CHROMIUM) --headless --no-sandbox --disable-gpu --hide-scrollbars --window-size=2300,1400 \
		--screenshot=$(CURDIR)/docs/report.png file://$(CURDIR)/.bin/report.html

# images builds the webhook's and the agent's images without a container
# engine, as OCI image layout archives in .bin/images (hack/images; the
# Images section of docs/install.md says how to load or push them).
images:
	$(GO) run ./hack/images --out .bin/images

# scheduler builds gpuadmit-scheduler (its own module; the first build
# compiles kube-scheduler and takes minutes).
scheduler:
	cd scheduler && $(GO) build -trimpath -o ../bin/ \
		-ldflags "-X k8s.io/component-base/version.gitVersion=v1.37.0 -X k8s.io/component-base/version.gitMajor=1 -X k8s.io/component-base/version.gitMinor=37" \
		./cmd/gpuadmit-scheduler

bench:
	$(GO) test -run '^$$' -bench . -benchmem ./pkg/mutate ./pkg/inventory

# bench-admission runs the admission latency study (no webhook, a
# no-op webhook, gpuadmit and OPA at 10, 50 and 200 clients, about five
# minutes on 2 cores) into $(BENCH_OUT)/admission. Each webhook server
# runs as its own process (gpuadmit is cmd/webhook, built into the log
# directory); `gpuadmit-bench admission --mix template|distinct` measures
# pods of one template or pods that all differ. The benchmarks write outside
# the repository; docs/benchmarks.md keeps the summaries of its figures.
BENCH_OUT ?= /tmp/gpuadmit-bench
bench-admission:
	./hack/tools.sh >/dev/null
	./hack/e2e-binaries.sh >/dev/null
	mkdir -p $(BENCH_OUT)/admission
	cd bench && $(GO) run ./cmd/gpuadmit-bench admission --out $(abspath $(BENCH_OUT))/admission >$(abspath $(BENCH_OUT))/admission/table.md

# bench-packing runs the packing study (24 pod lists, 7 policies, seeds 42-51:
# 1,680 runs, about 27 minutes on one core) on the openb trace in OPENB into
# $(BENCH_OUT)/packing. The trace is not in the repository: docs/trace.md
# says where it comes from, hack/fetch-openb.sh DIR fetches it, and the study
# checks every file it reads against bench/packing/openb.sha256.
OPENB ?= ../shared/data/openb
bench-packing:
	cd bench && $(GO) run ./cmd/gpuadmit-bench study --trace $(abspath $(OPENB)) --out $(abspath $(BENCH_OUT))/packing

dev-cluster:
	./hack/dev-cluster.sh up

dev-cluster-down:
	./hack/dev-cluster.sh down

#!/usr/bin/env bash
# make dev-cluster / make dev-cluster-down: start or stop a local control plane
# with gpuadmit's webhook and fake GPU nodes (see test/e2e/devcluster).
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
dir=$root/.dev-cluster
cd "$root"
case "${1:-up}" in
up)
  if [ -f "$dir/pid" ] && kill -0 "$(cat "$dir/pid")" 2>/dev/null; then
    echo "dev cluster already running (pid $(cat "$dir/pid")); make dev-cluster-down stops it"; exit 0
  fi
  bin=$(./hack/e2e-binaries.sh)
  go build -o bin/dev-cluster ./test/e2e/devcluster
  mkdir -p "$dir"; rm -f "$dir/ready"
  setsid nohup bin/dev-cluster --dir "$dir" --bin "$bin" >"$dir/dev-cluster.log" 2>&1 &
  echo $! >"$dir/pid"
  for _ in $(seq 1 120); do
    [ -f "$dir/ready" ] && break
    kill -0 "$(cat "$dir/pid")" 2>/dev/null || { cat "$dir/dev-cluster.log"; exit 1; }
    sleep 1
  done
  [ -f "$dir/ready" ] || { echo "dev cluster did not come up; logs in $dir"; exit 1; }
  cat <<MSG
gpuadmit dev cluster is up: kube-apiserver, etcd, kube-scheduler, kube-controller-manager,
kwok with the GPU nodes of examples/nodes.yaml, and gpuadmit's webhook (embedded policies).

  export KUBECONFIG=$dir/kubeconfig PATH=$bin:\$PATH
  kubectl get nodes -L gpuadmit.io/pool,nvidia.com/gpu.product
  kubectl apply -f examples/pods/
  kubectl get pods -n team-a -o wide
  kubectl get pod -n team-a hami-memory -o jsonpath='{.metadata.annotations.gpuadmit\.io/decision}'
  kubectl get events -n team-a

Component logs: $dir/*.log.  Stop it all: make dev-cluster-down
MSG
  ;;
down)
  if [ -f "$dir/pid" ]; then
    pid=$(cat "$dir/pid")
    kill -TERM "$pid" 2>/dev/null || true
    for _ in $(seq 1 30); do kill -0 "$pid" 2>/dev/null || break; sleep 1; done
    kill -KILL "$pid" 2>/dev/null || true
    rm -f "$dir/pid" "$dir/ready"
    echo "dev cluster stopped"
  else
    echo "no dev cluster running"
  fi
  ;;
*) echo "usage: $0 up|down" >&2; exit 2 ;;
esac

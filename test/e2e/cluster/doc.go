// Package cluster starts a real control plane on loopback for gpuadmit's
// end-to-end tests and dev cluster: etcd and kube-apiserver (through
// controller-runtime's envtest), kube-scheduler, kube-controller-manager
// (resourcequota, namespace, garbagecollector, serviceaccount-token,
// serviceaccount controllers), kwok managing fake GPU nodes, and gpuadmit's
// webhook in process, registered with the webhook configuration from
// deploy/base. Every port is chosen free at start; Stop ends every process.
package cluster

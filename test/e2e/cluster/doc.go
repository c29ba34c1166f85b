// Package cluster starts a real control plane on loopback for gpuadmit's
// end-to-end tests and dev cluster: etcd and kube-apiserver (through
// controller-runtime's envtest), kube-scheduler, kube-controller-manager
// (resourcequota, namespace, garbagecollector, serviceaccount-token,
// serviceaccount, resourceclaim, replicaset, job, statefulset and
// daemonset controllers), kwok managing fake GPU nodes, and gpuadmit as
// deploy/base runs it: the webhook (registered with the webhook configuration
// from deploy/base) and the controller, each as its own ServiceAccount. They
// run in process, or as cmd/webhook processes when Options.WebhookBinary
// names one (the admission benchmark measures it so).
// Every port is chosen free at start; Stop ends every process. Options add
// API server flags and controllers, for a control plane that real kubelets
// join (package node).
package cluster

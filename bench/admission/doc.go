// Package admission measures what a mutating admission webhook costs pod
// creation on a real control plane: kube-apiserver and etcd from
// package cluster, 1,000 fake GPU nodes, and pods created from N concurrent
// clients, each Create timed end to end on the client. Four configurations
// are compared by registering one MutatingWebhookConfiguration at a time,
// identical but for the server it calls:
//
//   - none: no webhook, the floor;
//   - noop: a controller-runtime webhook.Server with gpuadmit's TLS setup
//     whose handler decodes the pod and allows it unchanged;
//   - gpuadmit: gpuadmit's webhook with the embedded default policies;
//   - opa: `opa run --server` with TLS and the Rego policy in opa/, which
//     answers with the AdmissionReview and a JSON patch equivalent to
//     gpuadmit's for the benchmark's pods (the kube-mgmt way, with the pools
//     pushed into OPA's data).
//
// The pods come in one of three mixes (Mix): twelve shapes in turn (GPU
// memory, whole GPUs, HAMi's dialect), one template for all (as a
// controller's pods, which gpuadmit's decision memo answers after the
// first), or all different to the policy (the memo never hits). The report
// counts gpuadmit's memo hits and misses.
//
// Every webhook server is a process of its own, as deployed, apart from
// this one, which holds only the load-generating clients: gpuadmit is the
// cmd/webhook binary with its flags and its ServiceAccount's credentials
// (cluster.Options.WebhookBinary), the no-op webhook this executable's
// NoopCommand, OPA its own binary. So the clients' garbage collection stays
// out of the webhooks' tails, and CPU time is read per process from /proc.
//
// Besides the client latencies it reads the API server's
// apiserver_admission_webhook_admission_duration_seconds and each webhook
// server's own histograms, from its process's /metrics, before and after
// every run. Run writes results.json and a PNG; it is a benchmark, so it
// reports and never fails on a number. `gpuadmit-bench admission` runs it.
package admission

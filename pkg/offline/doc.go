// Package offline runs gpuadmit's decision without a cluster. It is what
// `gpuadmit mutate`, `gpuadmit test` and `gpuadmit catalog` run.
//
// Mutate reads Pods and workloads — Deployments, StatefulSets, DaemonSets,
// ReplicaSets, Jobs and CronJobs — from a file of one or more documents (and
// Lists), from standard input, or from a directory searched recursively for
// *.yaml, *.yml and *.json; other kinds are skipped with a note. Each Pod,
// and the pod each workload's template makes (named as its controller would
// name it, in the object's namespace or the default one), is decided by the
// same Mutator the webhook runs, over an inventory built from a stream of
// Nodes, with an optional Namespace and a policy set.
//
// With JSON output Mutate prints one array, an Output per Pod or pod
// template in input order:
//
//	[{"kind": "Deployment", "namespace": "ml", "name": "infer", "source": "app.yaml",
//	  "allowed": true, "message": "", "warnings": [],
//	  "patch": [...],  // JSON patch against the pod (the template's metadata and spec as a Pod)
//	  "pod": {...},    // that pod as admitted, or as it arrived when denied
//	  "explanation": "..."}]
//
// With YAML output it prints each object rewritten — the Pod, or the workload
// with its template's metadata and spec replaced — under comments with the
// verdict and explanation, documents separated by "---"; a denied object is
// printed as comments only.
package offline

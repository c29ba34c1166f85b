// Package webhook assembles gpuadmit's admission server: a controller-runtime
// manager serving the mutating webhook (/mutate-v1-pod) over TLS with a
// certificate reloaded from disk,
// the live inventory from a Node informer, namespaces from a Namespace
// informer, the policy engine fed by a watched policy path, Prometheus
// metrics, and /healthz and /readyz probes that report why the replica is or
// is not ready. It runs as one of three roles (Role): the webhook, which
// serves reviews and writes nothing but Events; the controller, which runs
// the leader-elected reconcilers (gpuadmit's ResourceQuotas, the
// ResourceClaimTemplates of memory shares); or both in one process.
package webhook
